#!/usr/bin/env bash
# Session 9 call 5: 4-byte reductions over memory in blocks of 768, two per SM, loading through the
# read-only path (after) against blocks of 256 at full occupancy (before = 8849720), A B B A; test_fuse; pi.
set -uo pipefail
L=$OUT/logs; mkdir -p $L
t0=$SECONDS
b() { cmake -S $1 -B $2 -G Ninja -DRESIDENT_CUDA=ON -DCMAKE_BUILD_TYPE=Release > $L/configure-$3.log 2>&1 && cmake --build $2 -j 8 --target ${@:4} > $L/build-$3.log 2>&1 || { tail -40 $L/build-$3.log; tar czf $OUT/logs.tgz -C $OUT logs; exit 1; }; }
b . build/gpu after resident_cli test_fuse & 
b .session/before build/gpu-before before resident_cli &
wait
echo "build $((SECONDS-t0)) s"
for side in before after; do
  cli=build/gpu/tools/resident/resident; [ $side = before ] && cli=build/gpu-before/tools/resident/resident
  timeout 60 $cli bench pipeline --sizes 20,22,24,26 --repeat 3 --json $L/pipeline-$side-1.json > $L/pipeline-$side-1.log 2>&1 || echo "pipeline $side failed"
  echo "$side 1:"; grep -A7 "Spread over" $L/pipeline-$side-1.log | tail -4
done
timeout 120 build/gpu/tests/test_fuse --gtest_filter=-*beyond_32* > $L/test_fuse.log 2>&1; echo "test_fuse rc $? $(grep -E '^\[  PASSED|FAILED' $L/test_fuse.log | tr '\n' ' ' | cut -c1-300)"
for side in after before; do
  cli=build/gpu/tools/resident/resident; [ $side = before ] && cli=build/gpu-before/tools/resident/resident
  timeout 60 $cli bench pipeline --sizes 20,22,24,26 --repeat 3 --json $L/pipeline-$side-2.json > $L/pipeline-$side-2.log 2>&1 || echo "pipeline $side failed"
  echo "$side 2:"; grep -A7 "Spread over" $L/pipeline-$side-2.log | tail -4
done
for side in before after; do
  cli=build/gpu/tools/resident/resident; [ $side = before ] && cli=build/gpu-before/tools/resident/resident
  timeout 60 $cli bench rng --json $L/rng-$side.json > $L/rng-$side.log 2>&1; echo "rng $side rc $?"; grep -E "pi, " $L/rng-$side.log | head -2
done
echo "total $((SECONDS-t0)) s"
tar czf $OUT/logs.tgz -C $OUT logs && rm -rf $L
