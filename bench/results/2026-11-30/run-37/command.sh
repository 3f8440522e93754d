#!/usr/bin/env bash
# Session call 5: memcheck with stream-ordered race tracking and initcheck over the streaming, fused,
# run-time and flow tests, after the streaming allocation fix.
set -uo pipefail
L=$OUT/logs; mkdir -p $L
t0=$SECONDS
cmake -S . -B build/gpu -G Ninja -DRESIDENT_CUDA=ON -DCMAKE_BUILD_TYPE=Release > $L/configure.log 2>&1
cmake --build build/gpu -j 16 --target test_streaming test_fuse test_jit test_flow test_memory > $L/build.log 2>&1 || { tail -50 $L/build.log; tar czf $OUT/logs.tgz -C $OUT logs; exit 1; }
echo "build $((SECONDS-t0)) s"
san() { # tool bin extra-skip
  local extra=""; [ $1 = memcheck ] && extra="--leak-check full --track-stream-ordered-races all"
  timeout 240 compute-sanitizer --tool $1 $extra --error-exitcode=1 build/gpu/tests/$2 --gtest_filter="*/cuda:-*out_of_memory*:device_fault*:*peer.*$3" > $L/san-$1-$2.log 2>&1
  echo "san $1 $2 rc $? $(grep -E 'ERROR SUMMARY|PASSED|FAILED' $L/san-$1-$2.log | tr '\n' ' ' | cut -c1-160)"; }
fp=':*graph_replay_equals_eager*:*replay_against_fp64*'
san memcheck test_streaming "$fp" & san initcheck test_streaming "" &
san memcheck test_fuse "$fp" & san memcheck test_jit "$fp" & san memcheck test_flow "$fp" & san memcheck test_memory "$fp" &
san initcheck test_jit "" &
wait
echo "total $((SECONDS-t0)) s"
tar czf $OUT/logs.tgz -C $OUT logs && rm -rf $L
