# Sourced by the GPU check scripts: `step NAME COMMAND...` runs a command with its output in
# $logs/NAME.log, records ok/FAIL and its seconds in the array `rows`, and sets status=1 on a failure;
# `step_table` prints those rows.
status=0
rows=()

step() {
  local name=$1
  shift
  local t0=$SECONDS
  echo "== $name: $*" >&2
  if "$@" >"$logs/$name.log" 2>&1; then
    rows+=("$name|ok|$((SECONDS - t0))")
  else
    rows+=("$name|FAIL|$((SECONDS - t0))")
    status=1
    tail -n 30 "$logs/$name.log" >&2
  fi
}

# The steps as an aligned table: name, ok/FAIL/skip, seconds.
step_table() {
  echo "step                                              result  seconds"
  echo "------------------------------------------------  ------  -------"
  local r n res sec
  for r in "${rows[@]}"; do
    IFS='|' read -r n res sec <<<"$r"
    printf "%-48s  %-6s  %7s\n" "$n" "$res" "$sec"
  done
}
