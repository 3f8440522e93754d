#!/usr/bin/env bash
# Session 11 call 3: (1) blocks of 1024 (waiting first) for sums from 2^21 elements (wide, reduce_wide_from
# = 2^21) against from 2^23 (head, 52522b8): bench pipeline A B B A; (2) bench stream over pinned memory at
# depth 3 (the default) against 4, A B B A, on head.
set -uo pipefail
L=$OUT/logs; mkdir -p $L
t0=$SECONDS
nvidia-smi -L > $L/gpu.txt
cmake -S .session/head -B build/gpu-head -G Ninja -DRESIDENT_CUDA=ON -DCMAKE_BUILD_TYPE=Release > $L/configure-head.log 2>&1
cmake -S .session/wide -B build/gpu-wide -G Ninja -DRESIDENT_CUDA=ON -DCMAKE_BUILD_TYPE=Release > $L/configure-wide.log 2>&1
( cmake --build build/gpu-head -j 8 --target resident_cli > $L/build-head.log 2>&1 || echo "head build failed" ) &
( cmake --build build/gpu-wide -j 8 --target resident_cli > $L/build-wide.log 2>&1 || echo "wide build failed" ) &
wait
echo "build $((SECONDS-t0)) s"
H=build/gpu-head/tools/resident/resident; W=build/gpu-wide/tools/resident/resident
[ -x $H ] && [ -x $W ] || { tail -30 $L/build-*.log; exit 1; }
for side in head wide wide head; do
  cli=$H; [ $side = wide ] && cli=$W
  timeout 60 $cli bench pipeline --sizes 20,21,22,23,24 --repeat 3 --json $L/pipeline-$side-$SECONDS.json > $L/pipeline-$side-$SECONDS.log 2>&1 || echo "pipeline $side failed"
done
echo "pipelines $((SECONDS-t0)) s"
for f in $L/pipeline-*.json; do python3 -c "
import json;d=json.load(open('$f'))
print('$(basename $f)', ' '.join('2^%d s%.3f[%.3f-%.3f] d%.3f[%.3f-%.3f]'%(r['log2_n'],r['sum_rate_over_memcpy_rate'],r['sum_rate_over_memcpy_rate_min'],r['sum_rate_over_memcpy_rate_max'],r['dot_rate_over_memcpy_rate'],r['dot_rate_over_memcpy_rate_min'],r['dot_rate_over_memcpy_rate_max']) for r in d['rows']))"; done
for depth in 3 4 4 3; do
  timeout 90 $H bench stream --size 8GiB --pool-limit 2GiB --pinned --depth $depth --json $L/stream-d$depth-$SECONDS.json > $L/stream-d$depth-$SECONDS.log 2>&1 || echo "stream $depth failed"
  echo "depth $depth $(grep -E 'duplex copies: upload|streamed, pinned' $L/stream-d$depth-*.log | tail -2 | tr -s ' ' | tr '\n' '|') $((SECONDS-t0)) s"
done
tar czf $OUT/logs.tgz -C $OUT logs && rm -rf $L
