#!/usr/bin/env bash
# Session 8 call 1: A/B of dependent launch triggered before the wait (and the plain-store pageable
# upload) against HEAD; where small calls' time goes (call_cost); tests of the changed kernels.
set -uo pipefail
L=$OUT/logs; mkdir -p $L
t0=$SECONDS
b() { cmake -S $1 -B $2 -G Ninja -DRESIDENT_CUDA=ON -DCMAKE_BUILD_TYPE=Release > $L/configure-$3.log 2>&1 && cmake --build $2 -j 16 --target ${@:4} > $L/build-$3.log 2>&1 || { tail -40 $L/build-$3.log; tar czf $OUT/logs.tgz -C $OUT logs; exit 1; }; }
b . build/gpu after resident_cli call_cost host_staging test_fuse test_jit test_flow test_streaming
b .session/before build/gpu-before before resident_cli
echo "build $((SECONDS-t0)) s"
for t in test_fuse test_jit test_flow test_streaming; do timeout 100 build/gpu/tests/$t > $L/$t.log 2>&1; echo "$t rc $? $(grep -E '^\[  PASSED|FAILED' $L/$t.log | tr '\n' ' ' | cut -c1-200)"; done
echo "tests $((SECONDS-t0)) s"
timeout 60 build/gpu/bench/call_cost > $L/call_cost.log 2>&1; echo "call_cost rc $?"; cat $L/call_cost.log
for r in 1 2; do for side in before after; do
  cli=build/gpu/tools/resident/resident; [ $side = before ] && cli=build/gpu-before/tools/resident/resident
  timeout 40 $cli bench flow --json $L/flow-$side-$r.json > $L/flow-$side-$r.log 2>&1 || echo "flow $side $r failed"
  timeout 30 $cli bench small --json $L/small-$side-$r.json > $L/small-$side-$r.log 2>&1 || echo "small $side $r failed"
  [ $r = 1 ] && { timeout 80 $cli bench pipeline --sizes 20,22,24,26 --repeat 3 --json $L/pipeline-$side-$r.json > $L/pipeline-$side-$r.log 2>&1 || echo "pipeline $side $r failed"; }
  echo "$side $r: $(grep -E 'chain, graph replay, per stage|without dependent' $L/flow-$side-$r.log | awk '{print $(NF-3), $(NF-2)}' | tr '\n' ' ') small: $(grep -E 'one launch per call|graph replay \(' $L/small-$side-$r.log | awk '{print $(NF-1)}' | tr '\n' ' ')"
  [ $r = 1 ] && grep -A6 "Spread over" $L/pipeline-$side-$r.log | tail -4
done; done
echo "benches $((SECONDS-t0)) s"
for side in before after; do
  cli=build/gpu/tools/resident/resident; [ $side = before ] && cli=build/gpu-before/tools/resident/resident
  timeout 120 $cli bench stream --size 4GiB --pool-limit 1GiB --json $L/stream-$side.json > $L/stream-$side.log 2>&1; echo "stream $side rc $?"
  grep -E "^  (streamed|pinned duplex copies: upload)" $L/stream-$side.log | head -6
done
echo "stream $((SECONDS-t0)) s"
timeout 60 build/gpu/bench/host_staging --size 2GiB --chunk 4MiB,16MiB --threads 12,16 --json $L/host-staging.json > $L/host-staging.log 2>&1; echo "staging rc $?"; grep -A4 "threads" $L/host-staging.log | head -12
echo "total $((SECONDS-t0)) s"
tar czf $OUT/logs.tgz -C $OUT logs && rm -rf $L
