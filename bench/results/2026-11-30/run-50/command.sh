#!/usr/bin/env bash
# Session 10 call 2: wide reductions (blocks of 1024, two per SM, unchecked trips) = after, against
# HEAD (b770c2c) = before: build both CLIs, A B B A bench pipeline; then test_fuse (after).
set -uo pipefail
L=$OUT/logs; mkdir -p $L
t0=$SECONDS
cmake -S . -B build/gpu -G Ninja -DRESIDENT_CUDA=ON -DCMAKE_BUILD_TYPE=Release > $L/configure.log 2>&1
cmake -S .session/before -B build/gpu-before -G Ninja -DRESIDENT_CUDA=ON -DCMAKE_BUILD_TYPE=Release > $L/configure-before.log 2>&1
( cmake --build build/gpu -j 10 --target resident_cli test_fuse > $L/build-after.log 2>&1 || echo "after build failed" ) &
( cmake --build build/gpu-before -j 6 --target resident_cli > $L/build-before.log 2>&1 || echo "before build failed" ) &
wait
echo "build $((SECONDS-t0)) s"
[ -x build/gpu/tools/resident/resident ] || { tail -30 $L/build-after.log; exit 1; }
for side in before after after before; do
  cli=build/gpu/tools/resident/resident; [ $side = before ] && cli=build/gpu-before/tools/resident/resident
  timeout 60 $cli bench pipeline --sizes 20,22,24,26,28 --repeat 3 --json $L/pipeline-$side-$SECONDS.json > $L/pipeline-$side-$SECONDS.log 2>&1 || echo "pipeline $side failed"
done
for f in $L/pipeline-*.json; do python3 -c "
import json;d=json.load(open('$f'));print('$(basename $f)','sum',[(r['log2_n'],round(r['sum_rate_over_memcpy_rate'],3),round(r['sum_rate_over_memcpy_rate_min'],3)) for r in d['rows']],'fused',[round(r['fused_over_memcpy'],3) for r in d['rows']])"; done
echo "bench $((SECONDS-t0)) s"
timeout 200 build/gpu/tests/test_fuse --gtest_filter='*/cuda:-*beyond_32_bit*' > $L/test_fuse.log 2>&1; echo "test_fuse rc=$? $((SECONDS-t0)) s"
grep -E "PASSED|FAILED|Failure" $L/test_fuse.log | head -20
timeout 150 compute-sanitizer --tool memcheck --error-exitcode=1 build/gpu/tests/test_fuse --gtest_filter='*reduc*/cuda:*four_byte*/cuda' > $L/memcheck-reduce.log 2>&1; echo "memcheck rc=$? $(grep -Eo 'ERROR SUMMARY: [0-9]+ errors' $L/memcheck-reduce.log) $((SECONDS-t0)) s"
tar czf $OUT/logs.tgz -C $OUT logs && rm -rf $L
