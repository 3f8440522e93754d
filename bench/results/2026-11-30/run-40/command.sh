#!/usr/bin/env bash
# Session 8 call 2: everything built; sanitizers over the changed kernels (dependent launch let go
# before the wait, the last block's unrolled fold); bench pipeline and the peers in one call; call costs.
set -uo pipefail
L=$OUT/logs; mkdir -p $L
t0=$SECONDS
cmake -S . -B build/gpu -G Ninja -DRESIDENT_CUDA=ON -DCMAKE_BUILD_TYPE=Release > $L/configure.log 2>&1
cmake --build build/gpu -j 16 > $L/build.log 2>&1 || { tail -50 $L/build.log; tar czf $OUT/logs.tgz -C $OUT logs; exit 1; }
echo "build $((SECONDS-t0)) s"
for t in test_fuse test_jit; do timeout 100 build/gpu/tests/$t > $L/$t.log 2>&1; echo "$t rc $? $(grep -E '^\[  PASSED|FAILED' $L/$t.log | tr '\n' ' ' | cut -c1-200)"; done
san() { local extra=""; [ $1 = memcheck ] && extra="--leak-check full --track-stream-ordered-races all"
  timeout 200 compute-sanitizer --tool $1 $extra --error-exitcode=1 build/gpu/tests/$2 --gtest_filter="*/cuda:-*out_of_memory*:device_fault*:*peer.*:*graph_replay_equals_eager*:*replay_against_fp64*" > $L/san-$1-$2.log 2>&1
  echo "san $1 $2 rc $? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY|^\[  PASSED|FAILED' $L/san-$1-$2.log | tr '\n' ' ' | cut -c1-160)"; }
san memcheck test_fuse & san racecheck test_fuse & san initcheck test_fuse & san memcheck test_jit & san memcheck test_flow &
wait
echo "sanitizers $((SECONDS-t0)) s"
timeout 120 build/gpu/tools/resident/resident bench pipeline --repeat 3 --json $L/pipeline.json > $L/pipeline.log 2>&1; echo "pipeline rc $? $((SECONDS-t0)) s"; grep -A8 "Spread over" $L/pipeline.log
timeout 200 env PYTHONUNBUFFERED=1 python3 bench/peers/peers.py --json $L/peers.json --device-peers build/gpu/bench/device_peers > $L/peers.log 2>&1; echo "peers rc $? $((SECONDS-t0)) s"; tail -40 $L/peers.log
timeout 70 build/gpu/bench/map_shapes 20 22 24 > $L/map_shapes.log 2>&1; echo "map_shapes rc $?"; grep -E "sweep 1|library|wave block 256 U4 4/SM|wave block 512 U4 4" $L/map_shapes.log | head -24
timeout 60 build/gpu/bench/call_cost > $L/call_cost.log 2>&1; echo "call_cost rc $?"; sed -n '/device time/,/cudaHostRegister/p' $L/call_cost.log
echo "total $((SECONDS-t0)) s"
tar czf $OUT/logs.tgz -C $OUT logs && rm -rf $L
