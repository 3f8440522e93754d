#!/usr/bin/env bash
# The bounded fuzz run of CI: builds the three libFuzzer targets (clang, ASan + UBSan, CPU backend),
# runs each over its stored corpus (tests/fuzz/corpus/<target>.tar.gz, unpacked into build/fuzz/corpus-<target>;
# fuzz_api: and tests/fuzz/regressions/) and then fuzzes it for SECONDS (default 75), the three at
# once. The stored corpus is read, never written (new inputs go to build/fuzz/ci-*).
# About 5 minutes on 2 cores, the build included. Fails on any crash, leak or sanitizer report,
# leaving the input in build/fuzz/ci-crash-*.
# fuzz_api runs every probe (the fixed defects stay fixed) unless RESIDENT_FUZZ_KNOWN says otherwise (0: none).
# usage: scripts/fuzz_ci.sh [SECONDS]
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-75}
targets=(cli validation api)
export RESIDENT_FUZZ_KNOWN=${RESIDENT_FUZZ_KNOWN:-1}
export OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-passive}  # three targets share the cores: no spinning threads
command -v clang++ >/dev/null || { echo "fuzz_ci: clang++ is missing: apt-get install clang libclang-rt-dev libomp-dev"; exit 1; }
start=$SECONDS
cmake -S . -B build/fuzz -G Ninja -DCMAKE_CXX_COMPILER=clang++ -DRESIDENT_CUDA=OFF -DRESIDENT_FUZZ=ON \
  -DRESIDENT_SANITIZE=ON -DRESIDENT_BUILD_TESTS=OFF -DRESIDENT_BUILD_EXAMPLES=OFF -DRESIDENT_BUILD_BENCH=OFF \
  -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build build/fuzz --target "${targets[@]/#/fuzz_}" -j "${JOBS:-$(nproc)}"
echo "fuzz_ci: built in $((SECONDS - start)) s; fuzzing each target for $seconds s (RESIDENT_FUZZ_KNOWN=$RESIDENT_FUZZ_KNOWN)"
pids=()
for t in "${targets[@]}"; do
  rm -rf "build/fuzz/ci-$t" "build/fuzz/corpus-$t" && mkdir -p "build/fuzz/ci-$t" "build/fuzz/corpus-$t"
  tar -xzf "tests/fuzz/corpus/$t.tar.gz" -C "build/fuzz/corpus-$t"
  (cd build/fuzz && ASAN_OPTIONS=allocator_may_return_null=1 ./tests/fuzz/fuzz_$t -max_total_time="$seconds" \
     -malloc_limit_mb=2147483647 -print_final_stats=1 -artifact_prefix="ci-crash-$t-" \
     "ci-$t" "corpus-$t" $([ "$t" = api ] && echo ../../tests/fuzz/regressions) >"ci-$t.log" 2>&1) &
  pids+=($!)
done
status=0
for i in "${!targets[@]}"; do
  t=${targets[$i]}
  if wait "${pids[$i]}"; then result=ok; else result=FAILED; status=1; fi
  echo "== fuzz_$t: $result, $(grep -E 'stat::number_of_executed_units' "build/fuzz/ci-$t.log" | tr -s ' ' | cut -d' ' -f2) runs, $(grep -E '^#[0-9]+.*(DONE|cov:)' "build/fuzz/ci-$t.log" | tail -1 | grep -oE 'cov: [0-9]+ ft: [0-9]+')"
  [ "$result" = ok ] || grep -E "^fuzz_api:|ERROR|SUMMARY|Test unit written" "build/fuzz/ci-$t.log" || true
done
echo "fuzz_ci: $((SECONDS - start)) s in all"
exit $status
