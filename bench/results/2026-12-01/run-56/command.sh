#!/usr/bin/env bash
# Session 11 call 2: short reductions in fewer blocks (after, 3b24e19) against one block per 256 vectors
# (before, f3be2d4): bench pipeline A B B A; ncu of the seed map at 2^22 and of one sum at 2^20; test_fuse
# and memcheck / racecheck over its reductions (after).
set -uo pipefail
L=$OUT/logs; mkdir -p $L
t0=$SECONDS
nvidia-smi -L > $L/gpu.txt
cmake -S .session/after -B build/gpu-after -G Ninja -DRESIDENT_CUDA=ON -DCMAKE_BUILD_TYPE=Release > $L/configure-after.log 2>&1
cmake -S .session/before -B build/gpu-before -G Ninja -DRESIDENT_CUDA=ON -DCMAKE_BUILD_TYPE=Release > $L/configure-before.log 2>&1
( cmake --build build/gpu-after -j 10 --target resident_cli test_fuse > $L/build-after.log 2>&1 || echo "after build failed" ) &
( cmake --build build/gpu-before -j 6 --target resident_cli > $L/build-before.log 2>&1 || echo "before build failed" ) &
wait
echo "build $((SECONDS-t0)) s"
A=build/gpu-after/tools/resident/resident; B=build/gpu-before/tools/resident/resident
[ -x $A ] || { tail -30 $L/build-after.log; exit 1; }
for side in before after after before; do
  cli=$A; [ $side = before ] && cli=$B
  timeout 60 $cli bench pipeline --sizes 18,20,21,22,24 --repeat 3 --json $L/pipeline-$side-$SECONDS.json > $L/pipeline-$side-$SECONDS.log 2>&1 || echo "pipeline $side failed"
done
echo "pipelines $((SECONDS-t0)) s"
for f in $L/pipeline-*.json; do python3 -c "
import json;d=json.load(open('$f'))
print('$(basename $f)', ' '.join('2^%d f%.3f s%.3f[%.3f-%.3f]%s'%(r['log2_n'],r['fused_over_memcpy'],r['sum_rate_over_memcpy_rate'],r['sum_rate_over_memcpy_rate_min'],r['sum_rate_over_memcpy_rate_max'],(' z%.3f d%.3f'%(r['zip_rate_over_memcpy_rate'],r['dot_rate_over_memcpy_rate']) if 'zip_ms' in r else '')) for r in d['rows']))"; done
M=sm__inst_executed.sum,smsp__inst_executed.avg.per_cycle_active,smsp__issue_active.avg.pct_of_peak_sustained_active,sm__cycles_elapsed.avg,gpu__time_duration.sum,lts__t_bytes.sum,dram__bytes.sum,sm__warps_active.avg.pct_of_peak_sustained_active,sm__throughput.avg.pct_of_peak_sustained_elapsed
timeout 60 ncu --kernel-name regex:fused_map_kernel --launch-count 1 --metrics $M $A bench pipeline --sizes 22 --repeat 1 --reps 1 --batch 1 > $L/ncu-map-22.log 2>&1; echo "ncu map rc=$? $((SECONDS-t0)) s"
timeout 60 ncu --kernel-name regex:fused_reduce_kernel --launch-count 1 --metrics $M $A bench pipeline --sizes 20 --repeat 1 --reps 1 --batch 1 > $L/ncu-sum-20.log 2>&1; echo "ncu sum rc=$? $((SECONDS-t0)) s"
grep -E "inst_executed.sum|issue_active|gpu__time_duration|per_cycle_active" $L/ncu-*.log
timeout 120 build/gpu-after/tests/test_fuse > $L/test_fuse.log 2>&1; echo "test_fuse rc=$? $((SECONDS-t0)) s"; grep -E "PASSED|FAILED|Failure" $L/test_fuse.log | head
for t in memcheck racecheck; do
  extra=""; [ $t = memcheck ] && extra="--leak-check full --track-stream-ordered-races all"
  timeout 90 compute-sanitizer --tool $t $extra --error-exitcode=1 build/gpu-after/tests/test_fuse --gtest_filter='*reduc*/cuda:*four_byte*/cuda' > $L/san-$t-reduce.log 2>&1
  echo "$t rc=$? $(grep -Eo 'ERROR SUMMARY: [0-9]+ errors|RACECHECK SUMMARY: [0-9]+ hazards' $L/san-$t-reduce.log) $((SECONDS-t0)) s"
done
tar czf $OUT/logs.tgz -C $OUT logs && rm -rf $L
