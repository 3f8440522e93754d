#!/usr/bin/env bash
# Session call 6: flat maps without the tile loop, reductions folding plain values: tests, benchmarks, sanitizers.
set -uo pipefail
L=$OUT/logs; mkdir -p $L
t0=$SECONDS
cmake -S . -B build/gpu -G Ninja -DRESIDENT_CUDA=ON -DCMAKE_BUILD_TYPE=Release > $L/configure.log 2>&1
cmake --build build/gpu -j 16 --target test_fuse test_jit resident_cli map_shapes > $L/build.log 2>&1 || { tail -50 $L/build.log; tar czf $OUT/logs.tgz -C $OUT logs; exit 1; }
echo "build $((SECONDS-t0)) s"
for t in test_fuse test_jit; do timeout 120 build/gpu/tests/$t > $L/$t.log 2>&1; echo "$t rc $? $(grep -E '^\[  PASSED|FAILED' $L/$t.log | tr '\n' ' ')"; done
timeout 120 build/gpu/tools/resident/resident bench pipeline --repeat 3 --json $L/pipeline.json > $L/pipeline.log 2>&1; echo "pipeline rc $? $((SECONDS-t0)) s"; grep -A8 "Spread over" $L/pipeline.log
timeout 60 build/gpu/tools/resident/resident bench jit --json $L/jit.json > $L/jit.log 2>&1; echo "bench jit rc $?"; grep -A5 "  n  memcpy" $L/jit.log
timeout 70 build/gpu/bench/map_shapes 22 26 28 > $L/map_shapes.log 2>&1; echo "map_shapes rc $? $((SECONDS-t0)) s"; grep -E "sweep|library|strided pdl block 128 |wave block 512 U4 4" $L/map_shapes.log | head -40
san() { local extra=""; [ $1 = memcheck ] && extra="--leak-check full --track-stream-ordered-races all"
  timeout 120 compute-sanitizer --tool $1 $extra --error-exitcode=1 build/gpu/tests/$2 --gtest_filter="*/cuda:-*out_of_memory*:device_fault*:*peer.*:*graph_replay_equals_eager*:*replay_against_fp64*" > $L/san-$1-$2.log 2>&1
  echo "san $1 $2 rc $? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY|^\[  PASSED|FAILED' $L/san-$1-$2.log | tr '\n' ' ' | cut -c1-160)"; }
san memcheck test_fuse & san racecheck test_fuse & san initcheck test_fuse & san memcheck test_jit &
wait
echo "total $((SECONDS-t0)) s"
tar czf $OUT/logs.tgz -C $OUT logs && rm -rf $L
