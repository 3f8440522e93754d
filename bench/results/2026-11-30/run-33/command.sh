#!/usr/bin/env bash
# Session call 1: build, all tests, NVTX cost, ncu of the library map vs the hand map, sanitizers over the new kernels.
set -uo pipefail
L=$OUT/logs; mkdir -p $L
t0=$SECONDS
cmake -S . -B build/gpu -G Ninja -DRESIDENT_CUDA=ON -DCMAKE_BUILD_TYPE=Release > $L/configure.log 2>&1
cmake --build build/gpu -j 16 > $L/build.log 2>&1 || { tail -50 $L/build.log; tar czf $OUT/logs.tgz -C $OUT logs; exit 1; }
echo "build $((SECONDS-t0)) s"
( cmake -S . -B build/gpu-nonvtx -G Ninja -DRESIDENT_CUDA=ON -DRESIDENT_NVTX=OFF -DCMAKE_BUILD_TYPE=Release \
  -DRESIDENT_BUILD_TESTS=OFF -DRESIDENT_BUILD_EXAMPLES=OFF -DRESIDENT_BUILD_BENCH=OFF >/dev/null && \
  cmake --build build/gpu-nonvtx --target resident_cli -j 6 ) > $L/build-nonvtx.log 2>&1 &
bpid=$!
timeout 200 ctest --test-dir build/gpu --output-on-failure -j 4 > $L/tests.log 2>&1
echo "tests rc $? $((SECONDS-t0)) s: $(grep -E 'tests passed|tests failed' $L/tests.log)"
grep -E "\*\*\*Failed|FAILED  \]|Timeout" $L/tests.log | head -20
wait $bpid; echo "nonvtx build rc $?"
timeout 100 scripts/nvtx_cost.sh $L > $L/nvtx_cost.log 2>&1; echo "nvtx rc $? $((SECONDS-t0)) s"; cat $L/nvtx_cost.log | tail -12
ncu --version | tail -1
timeout 90 ncu -k regex:'fused_map_kernel|flat_like_library' -c 3 --set full build/gpu/bench/map_shapes 26 > $L/ncu_map.log 2>&1
echo "ncu rc $? $((SECONDS-t0)) s"
if command -v nsys >/dev/null; then
  timeout 80 nsys profile -o $L/ms -t cuda --force-overwrite true build/gpu/bench/map_shapes 26 > $L/nsys_run.log 2>&1
  nsys stats -r cuda_gpu_kern_sum $L/ms.nsys-rep > $L/nsys_kern.log 2>&1
  nsys stats -r cuda_gpu_trace -f csv $L/ms.nsys-rep > $L/nsys_trace.csv 2>&1; rm -f $L/ms.nsys-rep $L/ms.sqlite
  echo "nsys $((SECONDS-t0)) s"
fi
cuobjdump -sass -fun fused_map_kernel build/gpu/bench/map_shapes > /dev/null 2>&1 && echo "cuobjdump ok"
san() { # tool bin filter
  timeout 170 compute-sanitizer --tool $1 $( [ $1 = memcheck ] && echo --leak-check full ) --error-exitcode=1 build/gpu/tests/$2 --gtest_filter="*/cuda:-*out_of_memory*:device_fault*:*peer.*$3" > $L/san-$1-$2.log 2>&1
  echo "san $1 $2 rc $? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY|PASSED|FAILED' $L/san-$1-$2.log | tr '\n' ' ' | cut -c1-200)"
}
san memcheck test_fuse ':*graph_replay_equals_eager*:*replay_against_fp64*' &
san memcheck test_jit ':*graph_replay_equals_eager*:*replay_against_fp64*' &
san memcheck test_streaming ':*graph_replay_equals_eager*:*replay_against_fp64*' &
san memcheck test_flow ':*graph_replay_equals_eager*:*replay_against_fp64*' &
san racecheck test_fuse '' &
san initcheck test_fuse '' &
san initcheck test_streaming '' &
wait
echo "done $((SECONDS-t0)) s"
tar czf $OUT/logs.tgz -C $OUT logs && rm -rf $L
