#!/usr/bin/env bash
# Session 9 call 1: fused reductions in blocks of 512, two per SM where they read memory (after)
# against blocks of 256 at full occupancy (before = HEAD), alternated A B B A; where a sum's time goes
# (map_shapes: fixed cost, reading without the fold); tests of the changed kernels, the 64 GiB map.
set -uo pipefail
L=$OUT/logs; mkdir -p $L
t0=$SECONDS
b() { cmake -S $1 -B $2 -G Ninja -DRESIDENT_CUDA=ON -DCMAKE_BUILD_TYPE=Release > $L/configure-$3.log 2>&1 && cmake --build $2 -j 16 --target ${@:4} > $L/build-$3.log 2>&1 || { tail -40 $L/build-$3.log; tar czf $OUT/logs.tgz -C $OUT logs; exit 1; }; }
b . build/gpu after resident_cli call_cost map_shapes test_fuse test_jit test_flow test_streaming test_random
b .session/before build/gpu-before before resident_cli call_cost
echo "build $((SECONDS-t0)) s"
for t in test_fuse test_jit test_flow test_streaming test_random; do timeout 150 build/gpu/tests/$t > $L/$t.log 2>&1; echo "$t rc $? $(grep -E '^\[  PASSED|FAILED|beyond_32' $L/$t.log | tr '\n' ' ' | cut -c1-300)"; done
echo "tests $((SECONDS-t0)) s"
for r in 1 2; do
  order="before after"; [ $r = 2 ] && order="after before"
  for side in $order; do
    cli=build/gpu/tools/resident/resident; [ $side = before ] && cli=build/gpu-before/tools/resident/resident
    timeout 90 $cli bench pipeline --sizes 20,22,24,26,28 --repeat 3 --json $L/pipeline-$side-$r.json > $L/pipeline-$side-$r.log 2>&1 || echo "pipeline $side $r failed"
    echo "$side $r:"; grep -A8 "Spread over" $L/pipeline-$side-$r.log | tail -6
  done
done
echo "A/B $((SECONDS-t0)) s"
for side in after before; do
  cc=build/gpu/bench/call_cost; [ $side = before ] && cc=build/gpu-before/bench/call_cost
  timeout 60 $cc > $L/call_cost-$side.log 2>&1; echo "call_cost $side rc $?"; grep -E "^  2\^|sum\(x" $L/call_cost-$side.log
done
for side in before after; do
  cli=build/gpu/tools/resident/resident; [ $side = before ] && cli=build/gpu-before/tools/resident/resident
  timeout 60 $cli bench rng --json $L/rng-$side.json > $L/rng-$side.log 2>&1; echo "rng $side rc $?"; grep -iE "pi|sum" $L/rng-$side.log | head -4
done
timeout 90 build/gpu/bench/map_shapes 20 22 24 > $L/map_shapes.log 2>&1; echo "map_shapes rc $?"; grep -E "sweep 3|sum " $L/map_shapes.log | tail -20
echo "total $((SECONDS-t0)) s"
tar czf $OUT/logs.tgz -C $OUT logs && rm -rf $L
