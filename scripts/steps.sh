# Sourced by the GPU check scripts: `step NAME COMMAND...` runs a command with its output in
# $logs/NAME.log, records ok/FAIL and its seconds in the array `rows`, and sets status=1 on a failure.
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
