#!/usr/bin/env bash
# Builds the libFuzzer targets (CPU backend, clang, ASan + UBSan) and runs each for SECONDS (default
# 600), all at once, on the corpus in tests/fuzz/corpus/ (new inputs that reach new code are added
# there). Crashes are written to build/fuzz/crash-*; the run fails if any target crashed.
# fuzz_api runs every probe, those of the fixed defects included, unless RESIDENT_FUZZ_KNOWN says otherwise (0: none;
# see tests/fuzz/fuzz_api.cpp and tests/fuzz/regressions/README.md).
# usage: scripts/fuzz.sh [SECONDS]
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-600}
targets=(cli validation api)
export RESIDENT_FUZZ_KNOWN=${RESIDENT_FUZZ_KNOWN:-1}
command -v clang++ >/dev/null || { echo "fuzz: clang++ is missing: apt-get install clang libclang-rt-dev libomp-dev"; exit 1; }
cmake -S . -B build/fuzz -G Ninja -DCMAKE_CXX_COMPILER=clang++ -DRESIDENT_CUDA=OFF -DRESIDENT_FUZZ=ON \
  -DRESIDENT_SANITIZE=ON -DRESIDENT_BUILD_TESTS=OFF -DRESIDENT_BUILD_EXAMPLES=OFF -DRESIDENT_BUILD_BENCH=OFF \
  -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build build/fuzz --target "${targets[@]/#/fuzz_}"
mkdir -p tests/fuzz/corpus/api
status=0
# Huge-size probes must reach the allocator and come back as null, not as libFuzzer's malloc limit.
for t in "${targets[@]}"; do
  (cd build/fuzz && ASAN_OPTIONS=allocator_may_return_null=1 ./tests/fuzz/fuzz_$t -max_total_time="$seconds" \
     -malloc_limit_mb=2147483647 -print_final_stats=1 ../../tests/fuzz/corpus/$t >"fuzz_$t.log" 2>&1) &
done
for j in $(jobs -p); do wait "$j" || status=1; done
for t in "${targets[@]}"; do
  echo "== fuzz_$t: $(grep -E 'stat::number_of_executed_units|Done [0-9]+ runs' build/fuzz/fuzz_$t.log | tr '\n' ' ')"
  grep -E "^fuzz_api:|ERROR|crash-" build/fuzz/fuzz_$t.log || true
done
exit $status
