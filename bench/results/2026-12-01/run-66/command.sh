#!/usr/bin/env bash
# Session 12 call 6: the wide sums' loads from the first aligned vector with the scalar head and tail
# after them: after (wide from 2^23) and afterall (wide at every length) against 0aca93f (before):
# bench pipeline --sizes 20,21,22,24,26,28 --repeat 3, before after afterall afterall after before;
# then the whole test suite and memcheck over test_fuse's reductions on afterall (the wide kernel in
# every reduction test).
set -uo pipefail
L=$OUT/logs; mkdir -p $L
t0=$SECONDS
for t in before after afterall; do cmake -S .session/$t -B build/gpu-$t -G Ninja -DRESIDENT_CUDA=ON -DCMAKE_BUILD_TYPE=Release > $L/configure-$t.log 2>&1; done
( cmake --build build/gpu-before -j 3 --target resident_cli > $L/build-before.log 2>&1 || echo "before build failed" ) &
( cmake --build build/gpu-after -j 3 --target resident_cli > $L/build-after.log 2>&1 || echo "after build failed" ) &
( cmake --build build/gpu-afterall -j 12 > $L/build-afterall.log 2>&1 || { echo "afterall build failed"; grep -E "error" $L/build-afterall.log | head; } ) &
wait
echo "build $((SECONDS-t0)) s"
for t in before after afterall afterall after before; do
  timeout 45 build/gpu-$t/tools/resident/resident bench pipeline --sizes 20,21,22,24,26,28 --repeat 3 --json $L/pipeline-$t-$SECONDS.json > $L/pipeline-$t-$SECONDS.log 2>&1 || echo "pipeline $t failed"
  echo "pipeline $t $((SECONDS-t0)) s"
done
left=$((540 - SECONDS + t0)); echo "left $left s"
timeout $((left - 45)) ctest --test-dir build/gpu-afterall -j 6 --output-on-failure > $L/ctest.log 2>&1; echo "ctest rc=$? $((SECONDS-t0)) s"
grep -E "tests passed|FAILED|Failed  |\*\*\*Failed|Timeout|Not Run" $L/ctest.log | head -10
left=$((550 - SECONDS + t0))
[ $left -gt 20 ] && { timeout $((left - 5)) compute-sanitizer --tool memcheck --leak-check full --error-exitcode=1 build/gpu-afterall/tests/test_fuse --gtest_filter='*reduc*/cuda:*four_byte*/cuda:*slots*/cuda' > $L/san-fuse-reduce.log 2>&1; echo "memcheck rc=$? $(grep -Eo 'ERROR SUMMARY: [0-9]+ errors' $L/san-fuse-reduce.log) $(grep -Eo 'PASSED  \] [0-9]+ test' $L/san-fuse-reduce.log) $((SECONDS-t0)) s"; }
tar czf $OUT/logs.tgz -C $OUT logs && rm -rf $L
