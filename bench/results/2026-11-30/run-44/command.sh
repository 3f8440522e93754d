#!/usr/bin/env bash
# Session 9 call 2: the whole test suite at HEAD (the 64 GiB map included); bench pipeline (three
# sweeps); partials handed over in slots without a fence or an atomic (map_shapes); bench stream twice.
set -uo pipefail
L=$OUT/logs; mkdir -p $L
t0=$SECONDS
cmake -S . -B build/gpu -G Ninja -DRESIDENT_CUDA=ON -DCMAKE_BUILD_TYPE=Release > $L/configure.log 2>&1 && cmake --build build/gpu -j 16 > $L/build.log 2>&1 || { tail -40 $L/build.log; tar czf $OUT/logs.tgz -C $OUT logs; exit 1; }
echo "build $((SECONDS-t0)) s"
timeout 240 ctest --test-dir build/gpu --output-on-failure -j 4 > $L/tests.log 2>&1
echo "tests rc $? $((SECONDS-t0)) s: $(grep -E 'tests passed|tests failed' $L/tests.log)"
grep -E "\*\*\*Failed|FAILED  \]|Timeout|beyond_32" $L/tests.log | head -20
timeout 90 build/gpu/bench/map_shapes 22 24 26 > $L/map_shapes.log 2>&1; echo "map_shapes rc $?"; grep -E "sweep 3|sum  (library|wave block 256 U4 8/SM|wave block 1024 U4 2/SM|slots)" $L/map_shapes.log | tail -24
timeout 90 build/gpu/tools/resident/resident bench pipeline --repeat 3 --json $L/pipeline.json > $L/pipeline.log 2>&1; echo "pipeline rc $?"; grep -A8 "Spread over" $L/pipeline.log | tail -6
for r in 1 2; do
  timeout 120 build/gpu/tools/resident/resident bench stream --size 4GiB --pool-limit 1GiB --reps 5 --json $L/stream-$r.json > $L/stream-$r.log 2>&1; echo "stream $r rc $? $((SECONDS-t0)) s"
  grep -E "^  (measure|streamed|pinned duplex copies: upload)" $L/stream-$r.log
done
echo "total $((SECONDS-t0)) s"
tar czf $OUT/logs.tgz -C $OUT logs && rm -rf $L
