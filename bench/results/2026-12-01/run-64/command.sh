#!/usr/bin/env bash
# Session 12 call 4: wide sums at every length with 32-bit vector indices and one fold load (after,
# the working tree) against 718630a (before): bench pipeline --sizes 16,18,20,21,22,24,26,28 --repeat 3
# in the order before after after before; test_fuse and test_fuse_edges (after, CUDA cases, the 64 GiB
# sums among them); sum_bisect (after) at 2^20, 2^22, 2^24.
set -uo pipefail
L=$OUT/logs; mkdir -p $L
t0=$SECONDS
for side in s12 after; do cmake -S .session/$side -B build/gpu-$side -G Ninja -DRESIDENT_CUDA=ON -DCMAKE_BUILD_TYPE=Release > $L/configure-$side.log 2>&1; done
( cmake --build build/gpu-s12 -j 6 --target resident_cli > $L/build-before.log 2>&1 || echo "before build failed" ) &
( cmake --build build/gpu-after -j 10 --target resident_cli test_fuse test_fuse_edges sum_bisect > $L/build-after.log 2>&1 || { echo "after build failed"; tail -20 $L/build-after.log; } ) &
wait
echo "build $((SECONDS-t0)) s"
for side in before after after before; do
  b=build/gpu-after; [ $side = before ] && b=build/gpu-s12
  timeout 80 $b/tools/resident/resident bench pipeline --sizes 16,18,20,21,22,24,26,28 --repeat 3 --json $L/pipeline-$side-$SECONDS.json > $L/pipeline-$side-$SECONDS.log 2>&1 || echo "pipeline $side failed"
  echo "pipeline $side $((SECONDS-t0)) s"
done
timeout 150 build/gpu-after/tests/test_fuse --gtest_filter='*/cuda' > $L/test_fuse.log 2>&1; echo "test_fuse rc=$? $((SECONDS-t0)) s"; grep -E "PASSED|FAILED|beyond_32" $L/test_fuse.log | head
timeout 60 build/gpu-after/tests/test_fuse_edges --gtest_filter='*/cuda' > $L/test_fuse_edges.log 2>&1; echo "test_fuse_edges rc=$? $((SECONDS-t0)) s"; grep -E "PASSED|FAILED" $L/test_fuse_edges.log | head
left=$((570 - SECONDS + t0))
[ $left -gt 40 ] && { timeout $((left - 10)) build/gpu-after/bench/sum_bisect 20 22 24 > $L/sum_bisect.log 2>&1; echo "sum_bisect rc=$? $((SECONDS-t0)) s"; grep -E "sweep|library sum|hand, wide, wait|32-bit, fold|64-bit, fold" $L/sum_bisect.log; }
tar czf $OUT/logs.tgz -C $OUT logs && rm -rf $L
