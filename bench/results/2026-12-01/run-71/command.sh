#!/usr/bin/env bash
# Session 13 call 5: the CUDA cases of the tests the random, insight and fused-pipeline misuse fixes
# (merged after run 70) touch, within the session's last device time.
set -uo pipefail
L=$OUT/logs; mkdir -p $L
t0=$SECONDS
nvidia-smi -L > $L/host.txt 2>&1
cmake -S . -B build/gpu -G Ninja -DRESIDENT_CUDA=ON -DCMAKE_BUILD_TYPE=Release > $L/configure.log 2>&1
tests="test_fuse_edges test_fuse test_program test_random test_insight test_streaming"
cmake --build build/gpu -j 16 --target $tests > $L/build.log 2>&1 || { grep -E "error" $L/build.log | head -20; tar czf $OUT/logs.tgz -C $OUT logs; exit 1; }
echo "build $((SECONDS-t0)) s"
for t in $tests; do
  left=$((200 - SECONDS + t0)); [ $left -lt 10 ] && { echo "$t not run: out of time"; continue; }
  timeout $left build/gpu/tests/$t --gtest_filter='*/cuda' > $L/$t.log 2>&1; echo "$t rc=$? $(grep -E '^\[  (PASSED|FAILED)' $L/$t.log | tr '\n' ' ') $((SECONDS-t0)) s"
done
tar czf $OUT/logs.tgz -C $OUT logs && rm -rf $L
