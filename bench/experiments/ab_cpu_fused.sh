#!/usr/bin/env bash
# The CPU backend at BASE (a commit) against the working tree: `bench pipeline`, `demo` and the
# cpu_fused experiment (seed chain, light chain, sum; medians and minima; one and two threads), the two
# builds run alternately so load and drift hit both alike. Prints `uptime`'s load before each run.
# usage: bench/experiments/ab_cpu_fused.sh BASE
set -euo pipefail
cd "$(dirname "$0")/../.."
base=$1
cmake --preset cpu >/dev/null
cmake --build build/cpu --target resident_cli cpu_fused >/dev/null
alt=$(mktemp -d "${TMPDIR:-/tmp}/resident-ab-cpu-XXXXXX")  # private: no name to plant at
git archive "$base" | tar -x -C "$alt"
cp bench/experiments/cpu_fused.cpp "$alt/bench/experiments/"
grep -q cpu_fused "$alt/bench/CMakeLists.txt" ||
  printf '\nadd_executable(cpu_fused experiments/cpu_fused.cpp)\ntarget_link_libraries(cpu_fused PRIVATE resident::resident)\n' \
    >>"$alt/bench/CMakeLists.txt"
cmake -S "$alt" -B "$alt/build" -G Ninja -DRESIDENT_CUDA=OFF -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$alt/build" --target resident_cli cpu_fused >/dev/null
B=$alt/build/tools/resident/resident A=build/cpu/tools/resident/resident
FB=$alt/build/bench/cpu_fused
FA=build/cpu/bench/cpu_fused
name() { [ "$1" = "$B" ] || [ "$1" = "$FB" ] && echo "before ($base)" || echo after; }
echo "### resident bench pipeline --device cpu (default sizes 2^16..2^22, median of 10)"
for r in 1 2; do
  for bin in "$B" "$A"; do
    echo "== round $r: $(name "$bin"); load $(cut -d' ' -f1-3 /proc/loadavg)"
    "$bin" bench pipeline --device cpu 2>/dev/null | grep -E '^ +n  |^ +2\^|^CPU backend'
  done
done
echo
echo "### resident demo --device cpu (n = 2^22)"
for r in 1 2; do
  for bin in "$B" "$A"; do
    echo "== round $r: $(name "$bin"); load $(cut -d' ' -f1-3 /proc/loadavg)"
    "$bin" demo --device cpu 2>/dev/null | grep -E 'three kernels|resident, fused'
  done
done
echo
for spec in "seed min 2 21" "seed median 2 9" "seed median 1 9" "cheap min 2 21" "sum median 2 9"; do
  set -- $spec
  echo "### cpu_fused: WORK=$1 STAT=$2 OMP_NUM_THREADS=$3; $4 rounds; wall ms (process CPU ms)"
  sizes="10 12 14 16 18 20 22"
  [ "$3" = 1 ] && sizes="12 16 20"
  for bin in "$FB" "$FA"; do
    echo "== $(name "$bin"); load $(cut -d' ' -f1-3 /proc/loadavg)"
    WORK=$1 STAT=$2 OMP_NUM_THREADS=$3 timeout 300 "$bin" "$4" $sizes | tail -n +3
  done
  echo
done
