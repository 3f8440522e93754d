#!/usr/bin/env bash
# Session 8 call 4: flat maps indexed in 32 bits (after) against 64 bits (before = the parent commit),
# alternated; the 64 GiB map test; the hand-written shapes at 2^28 on this host.
set -uo pipefail
L=$OUT/logs; mkdir -p $L
t0=$SECONDS
b() { cmake -S $1 -B $2 -G Ninja -DRESIDENT_CUDA=ON -DCMAKE_BUILD_TYPE=Release > $L/configure-$3.log 2>&1 && cmake --build $2 -j 16 --target ${@:4} > $L/build-$3.log 2>&1 || { tail -40 $L/build-$3.log; tar czf $OUT/logs.tgz -C $OUT logs; exit 1; }; }
b . build/gpu after resident_cli test_fuse map_shapes
b .session/before build/gpu-before before resident_cli
echo "build $((SECONDS-t0)) s"
timeout 150 build/gpu/tests/test_fuse > $L/test_fuse.log 2>&1; echo "test_fuse rc $? $(grep -E '^\[  PASSED|FAILED|beyond_32' $L/test_fuse.log | tr '\n' ' ' | cut -c1-300)"
for r in 1 2; do for side in before after; do
  cli=build/gpu/tools/resident/resident; [ $side = before ] && cli=build/gpu-before/tools/resident/resident
  timeout 60 $cli bench pipeline --sizes 22,24,26,28 --repeat 3 --json $L/pipeline-$side-$r.json > $L/pipeline-$side-$r.log 2>&1 || echo "pipeline $side $r failed"
  echo "$side $r: $(grep -A6 'Spread over' $L/pipeline-$side-$r.log | tail -4 | awk '{print $1, $2, $3, $4, $5}' | tr '\n' ';')"
done; done
echo "A/B $((SECONDS-t0)) s"
timeout 60 build/gpu/bench/map_shapes 28 > $L/map_shapes.log 2>&1; echo "map_shapes rc $?"; grep -E "sweep|library|flat U2 strided pdl block 128|flat U2 pdl, plain loads, CUB store block 128" $L/map_shapes.log | head -20
echo "total $((SECONDS-t0)) s"
tar czf $OUT/logs.tgz -C $OUT logs && rm -rf $L
