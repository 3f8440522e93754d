#!/usr/bin/env bash
# Session 11 call 1: short sums over grids (sum_grids), and maps that wait before letting the next
# kernel be scheduled (waitmaps) against HEAD: bench pipeline A B B A.
set -uo pipefail
L=$OUT/logs; mkdir -p $L
t0=$SECONDS
nvidia-smi -L > $L/gpu.txt
cmake -S . -B build/gpu -G Ninja -DRESIDENT_CUDA=ON -DCMAKE_BUILD_TYPE=Release > $L/configure.log 2>&1
cmake -S .session/waitmaps -B build/gpu-wait -G Ninja -DRESIDENT_CUDA=ON -DCMAKE_BUILD_TYPE=Release > $L/configure-wait.log 2>&1
( cmake --build build/gpu -j 9 --target resident_cli sum_grids > $L/build.log 2>&1 || echo "HEAD build failed" ) &
( cmake --build build/gpu-wait -j 7 --target resident_cli > $L/build-wait.log 2>&1 || echo "wait build failed" ) &
wait
echo "build $((SECONDS-t0)) s"
[ -x build/gpu/bench/sum_grids ] || { tail -30 $L/build.log; exit 1; }
timeout 150 build/gpu/bench/sum_grids 18 20 21 22 23 24 > $L/sum_grids.log 2>&1; echo "sum_grids rc=$? $((SECONDS-t0)) s"
for side in head wait wait head; do
  cli=build/gpu/tools/resident/resident; [ $side = wait ] && cli=build/gpu-wait/tools/resident/resident
  timeout 60 $cli bench pipeline --sizes 20,21,22,23,24,26 --repeat 3 --json $L/pipeline-$side-$SECONDS.json > $L/pipeline-$side-$SECONDS.log 2>&1 || echo "pipeline $side failed"
done
echo "pipelines $((SECONDS-t0)) s"
for f in $L/pipeline-*.json; do python3 -c "
import json;d=json.load(open('$f'))
print('$(basename $f)', ' '.join('2^%d f%.3f[%.3f-%.3f] s%.3f[%.3f-%.3f]'%(r['log2_n'],r['fused_over_memcpy'],r['fused_over_memcpy_min'],r['fused_over_memcpy_max'],r['sum_rate_over_memcpy_rate'],r['sum_rate_over_memcpy_rate_min'],r['sum_rate_over_memcpy_rate_max']) for r in d['rows']))"; done
tar czf $OUT/logs.tgz -C $OUT logs && rm -rf $L
