#!/usr/bin/env bash
# Builds the libFuzzer targets (CPU backend, clang, ASan + UBSan) and runs each for SECONDS (default
# 600), all at once, on its corpus (tests/fuzz/corpus/<target>.tar.gz, unpacked into
# build/fuzz/corpus-<target>, where new inputs that reach new code are added). Then each corpus is
# minimized (-merge=1: the inputs that add coverage) and packed back into its archive. Crashes are
# written to build/fuzz/crash-*; the run fails if any target crashed, and leaves the archives as they were.
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
status=0
for t in "${targets[@]}"; do
  rm -rf "build/fuzz/corpus-$t" && mkdir -p "build/fuzz/corpus-$t"
  if [ -f "tests/fuzz/corpus/$t.tar.gz" ]; then tar -xzf "tests/fuzz/corpus/$t.tar.gz" -C "build/fuzz/corpus-$t"; fi
done
# Huge-size probes must reach the allocator and come back as null, not as libFuzzer's malloc limit.
for t in "${targets[@]}"; do
  (cd build/fuzz && ASAN_OPTIONS=allocator_may_return_null=1 ./tests/fuzz/fuzz_$t -max_total_time="$seconds" \
     -malloc_limit_mb=2147483647 -print_final_stats=1 -artifact_prefix=crash-$t- "corpus-$t" >"fuzz_$t.log" 2>&1) &
done
for j in $(jobs -p); do wait "$j" || status=1; done
for t in "${targets[@]}"; do
  echo "== fuzz_$t: $(grep -E 'stat::number_of_executed_units|Done [0-9]+ runs' build/fuzz/fuzz_$t.log | tr '\n' ' ')"
  grep -E "^fuzz_api:|ERROR|crash-" build/fuzz/fuzz_$t.log || true
done
[ $status = 0 ] || exit 1
# Keep the inputs that add coverage, packed alike on every machine (sorted names, no times or owners).
for t in "${targets[@]}"; do
  rm -rf "build/fuzz/merged-$t" && mkdir -p "build/fuzz/merged-$t"
  (cd build/fuzz && ASAN_OPTIONS=allocator_may_return_null=1 ./tests/fuzz/fuzz_$t -merge=1 \
     -malloc_limit_mb=2147483647 "merged-$t" "corpus-$t" >"merge_$t.log" 2>&1)
  tar --sort=name --mtime=@0 --owner=0 --group=0 --numeric-owner -C "build/fuzz/merged-$t" -cf - . |
    gzip -9n >"tests/fuzz/corpus/$t.tar.gz"
  echo "== corpus $t: $(ls "build/fuzz/merged-$t" | wc -l) inputs kept of $(ls "build/fuzz/corpus-$t" | wc -l)"
done
