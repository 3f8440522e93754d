#!/usr/bin/env bash
# Session 11 call 6: bench stream with the hand-written chunked pipeline beside the pinned stream (8 GiB
# over a 2 GiB pool), twice.
set -uo pipefail
L=$OUT/logs; mkdir -p $L
t0=$SECONDS
cd .session/final2
cmake -S . -B build/gpu -G Ninja -DRESIDENT_CUDA=ON -DCMAKE_BUILD_TYPE=Release > $L/configure.log 2>&1
cmake --build build/gpu -j 16 --target resident_cli > $L/build.log 2>&1 || { tail -30 $L/build.log; exit 1; }
echo "build $((SECONDS-t0)) s"
for r in 1 2; do
  left=$((290 - SECONDS + t0)); [ $left -gt 60 ] || break
  timeout $((left - 5)) build/gpu/tools/resident/resident bench stream --size 8GiB --pool-limit 2GiB --json $L/stream-$r.json > $L/stream-$r.log 2>&1; echo "stream $r rc=$? $((SECONDS-t0)) s"
  grep -E "duplex copies: upload|hand-written|streamed" $L/stream-$r.log | grep -v "bench stream"
done
tar czf $OUT/logs.tgz -C $OUT logs && rm -rf $L
