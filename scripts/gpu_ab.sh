#!/usr/bin/env bash
# A/B on the GPU machine: the benchmarks of another source tree (BEFORE, e.g. `git archive` of an
# older commit) and of this tree, built alike and run alternately in one call, so their ratios compare
# on one host. Also builds this tree's tests and runs them first.
#
# usage: scripts/gpu_ab.sh BEFORE_DIR LOG_DIR [ROUNDS]     (ROUNDS of each benchmark per tree; 2)
set -uo pipefail
cd "$(dirname "$0")/.."
before=$(realpath "$1")
logs=$2
rounds=${3:-2}
mkdir -p "$logs"
jobs=$(nproc)
build() {  # build SRC DIR TARGETS...
  local src=$1 dir=$2
  shift 2
  cmake -S "$src" -B "$dir" -G Ninja -DRESIDENT_CUDA=ON -DCMAKE_BUILD_TYPE=Release >/dev/null &&
    cmake --build "$dir" -j "$jobs" --target "$@"
}
build . build/gpu all > "$logs/build-after.log" 2>&1 || { tail -40 "$logs/build-after.log"; exit 1; }
build "$before" build/gpu-before resident_cli > "$logs/build-before.log" 2>&1 || { tail -40 "$logs/build-before.log"; exit 1; }
ctest --test-dir build/gpu --output-on-failure -j 4 > "$logs/tests.log" 2>&1
echo "tests: exit $? ($(grep -E 'tests passed|tests failed' "$logs/tests.log"))"
grep -E "\*\*\*Failed|FAILED  \]" "$logs/tests.log" | head -20
for r in $(seq 1 "$rounds"); do
  for side in before after; do
    cli=build/gpu/tools/resident/resident
    [ "$side" = before ] && cli=build/gpu-before/tools/resident/resident
    for b in pipeline small rng; do
      "$cli" bench "$b" --json "$logs/$b-$side-$r.json" > "$logs/$b-$side-$r.log" 2>&1 || echo "bench $b $side $r failed"
    done
  done
done
python3 - "$logs" "$rounds" <<'PY'
import json, sys, os
logs, rounds = sys.argv[1], int(sys.argv[2])
def rows(path):
    return json.load(open(path)).get("rows", [])
print("bench pipeline: fused / memcpy by size (before | after, each round)")
for side in ("before", "after"):
    for r in range(1, rounds + 1):
        p = os.path.join(logs, f"pipeline-{side}-{r}.json")
        if os.path.exists(p):
            print(f"  {side} {r}: " + "  ".join(f"2^{str(x['log2_n']).removeprefix('2^')} {x['fused_over_memcpy']:.3f}" for x in rows(p)))
PY
