#!/usr/bin/env bash
# What NVTX costs on the launch-bound small pipeline: `resident bench small` from a CUDA build with NVTX
# (build/gpu, or $BUILD) and from one without (configured here, $BUILD-nonvtx), the two binaries
# alternated three times so the GPU's clock drift falls on both. Writes small-nvtx-{on,off}-{1,2,3}.json
# into LOG_DIR and prints the medians; each JSON holds "nvtx" (absent / no tool attached / tool
# attached: a tool attached makes every range a call into it) and the hook's own ns per call.
#
# usage: scripts/nvtx_cost.sh [LOG_DIR]      (default: build/gpu-logs)
set -euo pipefail
cd "$(dirname "$0")/.."
logs=${1:-build/gpu-logs}
build=${BUILD:-build/gpu}
mkdir -p "$logs"
if [ ! -x "$build/tools/resident/resident" ]; then
  cmake -S . -B "$build" -G Ninja -DRESIDENT_CUDA=ON -DCMAKE_BUILD_TYPE=Release >/dev/null
  cmake --build "$build" --target resident_cli -j "$(nproc)"
fi
cmake -S . -B "$build-nonvtx" -G Ninja -DRESIDENT_CUDA=ON -DRESIDENT_NVTX=OFF -DCMAKE_BUILD_TYPE=Release \
  -DRESIDENT_BUILD_TESTS=OFF -DRESIDENT_BUILD_EXAMPLES=OFF -DRESIDENT_BUILD_BENCH=OFF >/dev/null
cmake --build "$build-nonvtx" --target resident_cli -j "$(nproc)"
for i in 1 2 3; do
  "$build/tools/resident/resident" bench small --json "$logs/small-nvtx-on-$i.json"
  "$build-nonvtx/tools/resident/resident" bench small --json "$logs/small-nvtx-off-$i.json"
done
python3 - "$logs" <<'PY'
import json, statistics, sys
d = sys.argv[1]
for side in ("on", "off"):
    runs = [json.load(open(f"{d}/small-nvtx-{side}-{i}.json")) for i in (1, 2, 3)]
    per = {}
    for j in runs:
        for r in j["rows"]:
            per.setdefault(r["variant"], []).append(r["us_per_call"])
    hook = statistics.median(j.get("hook_ns_per_call", float("nan")) for j in runs)
    print(f"NVTX {side} ({runs[0]['nvtx']}): hook {hook:.1f} ns per call")
    for v, us in per.items():
        print(f"  {v:<45} median {statistics.median(us):6.2f} us  (runs: {', '.join(f'{u:.2f}' for u in us)})")
PY
