#!/usr/bin/env bash
# Session 13 call 2: narrow sums (blocks of 256) indexing their vectors in 32 bits where every index
# fits (B), and B with the wide kernel's reading from the first aligned vector in them too (C), against
# d5d76c8 (A): bench pipeline --sizes 20,21,22,24,26,28 --repeat 3 in the order A B C C B A; then on B
# test_fuse and test_fuse_edges, memcheck over test_fuse's reductions; sum_bisect 22 on B.
set -uo pipefail
L=$OUT/logs; mkdir -p $L
t0=$SECONDS
nvidia-smi -L > $L/host.txt 2>&1
for t in A B C; do cmake -S .session/$t -B build/gpu-$t -G Ninja -DRESIDENT_CUDA=ON -DCMAKE_BUILD_TYPE=Release > $L/configure-$t.log 2>&1; done
( cmake --build build/gpu-A -j 4 --target resident_cli > $L/build-A.log 2>&1 || echo "A build failed" ) &
( cmake --build build/gpu-C -j 4 --target resident_cli > $L/build-C.log 2>&1 || echo "C build failed" ) &
( cmake --build build/gpu-B -j 8 --target resident_cli test_fuse test_fuse_edges sum_bisect > $L/build-B.log 2>&1 || { echo "B build failed"; grep -E "error" $L/build-B.log | head; } ) &
wait
echo "build $((SECONDS-t0)) s"
for t in A B C C B A; do
  timeout 50 build/gpu-$t/tools/resident/resident bench pipeline --sizes 20,21,22,24,26,28 --repeat 3 --json $L/pipeline-$t-$SECONDS.json > $L/pipeline-$t-$SECONDS.log 2>&1 || echo "pipeline $t failed"
  echo "pipeline $t $((SECONDS-t0)) s"
done
for f in $L/pipeline-*.json; do python3 -c "
import json,sys
j=json.load(open('$f'))
print('$(basename $f)', ' '.join('%d:%.3f/%.3f' % (r['log2_n'], r['sum_rate_over_memcpy_rate'], r['dot_rate_over_memcpy_rate']) for r in j['rows']))"; done
left=$((560 - SECONDS + t0)); echo "left $left s"
[ $left -gt 60 ] && { timeout 60 build/gpu-B/tests/test_fuse --gtest_filter='*/cuda' > $L/test_fuse.log 2>&1; echo "test_fuse rc=$? $(grep -E 'PASSED|FAILED' $L/test_fuse.log | head -3 | tr '\n' ' ') $((SECONDS-t0)) s"; }
left=$((560 - SECONDS + t0))
[ $left -gt 30 ] && { timeout 30 build/gpu-B/tests/test_fuse_edges --gtest_filter='*/cuda' > $L/test_fuse_edges.log 2>&1; echo "test_fuse_edges rc=$? $(grep -E 'PASSED|FAILED' $L/test_fuse_edges.log | head -3 | tr '\n' ' ') $((SECONDS-t0)) s"; }
left=$((560 - SECONDS + t0))
[ $left -gt 40 ] && { timeout $((left - 5)) compute-sanitizer --tool memcheck --leak-check full --error-exitcode=1 build/gpu-B/tests/test_fuse --gtest_filter='*reduc*/cuda:*four_byte*/cuda:*slots*/cuda' > $L/san-fuse-reduce.log 2>&1; echo "memcheck rc=$? $(grep -Eo 'ERROR SUMMARY: [0-9]+ errors' $L/san-fuse-reduce.log) $(grep -Eo 'PASSED  \] [0-9]+ test' $L/san-fuse-reduce.log) $((SECONDS-t0)) s"; }
tar czf $OUT/logs.tgz -C $OUT logs && rm -rf $L
