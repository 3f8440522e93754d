#!/usr/bin/env bash
# Session 10 call 4: wide reductions from 2^23 elements (A, the working tree) against the same with the
# reductions' dependent-launch prologue waiting first (B, .session/waitfirst), A B B A; ncu of the
# library's wide sum and the hand-written 1024-thread slots sum at 2^24 (kernels alone); test_fuse (A).
set -uo pipefail
L=$OUT/logs; mkdir -p $L
t0=$SECONDS
cmake -S . -B build/gpu -G Ninja -DRESIDENT_CUDA=ON -DCMAKE_BUILD_TYPE=Release > $L/configure.log 2>&1
cmake -S .session/waitfirst -B build/gpu-waitfirst -G Ninja -DRESIDENT_CUDA=ON -DCMAKE_BUILD_TYPE=Release > $L/configure-b.log 2>&1
( cmake --build build/gpu -j 10 --target resident_cli test_fuse map_shapes > $L/build-a.log 2>&1 || echo "A build failed" ) &
( cmake --build build/gpu-waitfirst -j 6 --target resident_cli > $L/build-b.log 2>&1 || echo "B build failed" ) &
wait
echo "build $((SECONDS-t0)) s"
[ -x build/gpu/tools/resident/resident ] || { tail -30 $L/build-a.log; exit 1; }
for side in a b b a; do
  cli=build/gpu/tools/resident/resident; [ $side = b ] && cli=build/gpu-waitfirst/tools/resident/resident
  timeout 50 $cli bench pipeline --sizes 20,22,24,26 --repeat 3 --json $L/pipeline-$side-$SECONDS.json > $L/pipeline-$side-$SECONDS.log 2>&1 || echo "pipeline $side failed"
done
for f in $L/pipeline-*.json; do python3 -c "
import json;d=json.load(open('$f'));print('$(basename $f)','sum',[(r['log2_n'],round(r['sum_rate_over_memcpy_rate'],3),round(r['sum_rate_over_memcpy_rate_min'],3)) for r in d['rows']],'fused',[round(r['fused_over_memcpy'],3) for r in d['rows']])"; done
echo "bench $((SECONDS-t0)) s"
for k in fused_reduce sum_wave_slots; do
  timeout 100 ncu --cache-control none --kernel-name regex:$k --launch-skip 20 --launch-count 3 --metrics gpu__time_duration.sum,launch__grid_size,launch__block_size,launch__registers_per_thread,sm__inst_executed.sum,dram__bytes_read.sum,lts__t_bytes.sum build/gpu/bench/map_shapes 24 > $L/ncu-$k.log 2>&1; echo "ncu $k rc $?"
  grep -E "^  [a-z_]+.*\(|gpu__time|grid_size|block_size|registers|inst_executed|dram__bytes|lts__t_bytes" $L/ncu-$k.log | cut -c1-110 | head -24
done
timeout 100 build/gpu/tests/test_fuse --gtest_filter='*/cuda:-*beyond_32_bit*' > $L/test_fuse.log 2>&1; echo "test_fuse rc=$? $((SECONDS-t0)) s"
grep -E "PASSED|FAILED|Failure" $L/test_fuse.log | head -10
tar czf $OUT/logs.tgz -C $OUT logs && rm -rf $L
