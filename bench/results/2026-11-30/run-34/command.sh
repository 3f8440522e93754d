#!/usr/bin/env bash
# Session call 2: run-time kernels with dependent launch, staging copies, the map's instruction count.
set -uo pipefail
L=$OUT/logs; mkdir -p $L
t0=$SECONDS
cmake -S . -B build/gpu -G Ninja -DRESIDENT_CUDA=ON -DCMAKE_BUILD_TYPE=Release > $L/configure.log 2>&1
cmake --build build/gpu -j 16 --target test_jit test_streaming test_host_copy_pool resident_cli map_shapes host_staging > $L/build.log 2>&1 || { tail -50 $L/build.log; tar czf $OUT/logs.tgz -C $OUT logs; exit 1; }
echo "build $((SECONDS-t0)) s"
for t in test_jit test_streaming test_host_copy_pool; do
  timeout 120 build/gpu/tests/$t > $L/$t.log 2>&1; echo "$t rc $? $(grep -E 'PASSED|FAILED' $L/$t.log | tr '\n' ' ')"
done
RESIDENT_PDL=0 timeout 60 build/gpu/tests/test_jit --gtest_filter='*chained*' > $L/test_jit_nopdl.log 2>&1; echo "jit nopdl rc $?"
ic() { env $1 timeout 150 compute-sanitizer --tool initcheck --error-exitcode=1 build/gpu/tests/test_streaming --gtest_filter='*pageable_host_memory_for_every*/cuda' > $L/initcheck-$2.log 2>&1; echo "initcheck $2 rc $? $(grep -E 'ERROR SUMMARY' $L/initcheck-$2.log)"; }
ic RESIDENT_PDL=0 nopdl & ic RESIDENT_PDL=1 pdl &
wait
echo "initcheck $((SECONDS-t0)) s"
timeout 120 build/gpu/tools/resident/resident bench jit --json $L/jit.json > $L/jit.log 2>&1; echo "bench jit rc $?"; grep -iE "over|ratio|2\^2[468]" $L/jit.log | head -20
M=gpu__time_duration.sum,smsp__inst_executed.sum,dram__bytes_read.sum,dram__bytes_write.sum,smsp__issue_active.avg.pct_of_peak_sustained_active,sm__warps_active.avg.pct_of_peak_sustained_active,sm__cycles_elapsed.avg.per_second
for k in fused_map_kernel flat_like_library flat; do
  timeout 60 ncu --clock-control none -k regex:"^$k\$" --launch-skip 4 -c 2 --metrics $M build/gpu/bench/map_shapes 26 > $L/ncu-$k.log 2>&1; echo "ncu $k rc $?"
  grep -E "^  [a-z_]+|gpu__time|inst_executed|dram__bytes|issue_active|warps_active|per_second" $L/ncu-$k.log | cut -c1-120 | head -20
done
echo "ncu $((SECONDS-t0)) s"
timeout 100 build/gpu/bench/host_staging --size 2GiB --chunk 4MiB,16MiB --threads 4,8,12,16 --json $L/host-staging.json > $L/host-staging.log 2>&1; echo "staging rc $?"; tail -30 $L/host-staging.log
timeout 150 build/gpu/tools/resident/resident bench stream --size 8GiB --pool-limit 2GiB --json $L/stream.json > $L/stream.log 2>&1; echo "stream rc $? $((SECONDS-t0)) s"; grep -vE "^\s*$" $L/stream.log | tail -30
tar czf $OUT/logs.tgz -C $OUT logs && rm -rf $L
