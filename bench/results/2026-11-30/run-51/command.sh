#!/usr/bin/env bash
# Session 10 call 3: three trees in one call: before (b770c2c), narrow (unchecked trips, blocks of
# 256 at 32 registers), wide (unchecked trips, blocks of 1024 two per SM where they fit). bench
# pipeline in the order before narrow wide wide narrow before; then map_shapes (wide tree: the
# hand-written sums beside the library's); test_fuse (wide).
set -uo pipefail
L=$OUT/logs; mkdir -p $L
t0=$SECONDS
cmake -S . -B build/gpu -G Ninja -DRESIDENT_CUDA=ON -DCMAKE_BUILD_TYPE=Release > $L/configure.log 2>&1
cmake -S .session/before -B build/gpu-before -G Ninja -DRESIDENT_CUDA=ON -DCMAKE_BUILD_TYPE=Release > $L/configure-before.log 2>&1
cmake -S .session/narrow -B build/gpu-narrow -G Ninja -DRESIDENT_CUDA=ON -DCMAKE_BUILD_TYPE=Release > $L/configure-narrow.log 2>&1
( cmake --build build/gpu -j 8 --target resident_cli test_fuse map_shapes > $L/build-wide.log 2>&1 || echo "wide build failed" ) &
( cmake --build build/gpu-before -j 4 --target resident_cli > $L/build-before.log 2>&1 || echo "before build failed" ) &
( cmake --build build/gpu-narrow -j 4 --target resident_cli > $L/build-narrow.log 2>&1 || echo "narrow build failed" ) &
wait
echo "build $((SECONDS-t0)) s"
[ -x build/gpu/tools/resident/resident ] || { tail -30 $L/build-wide.log; exit 1; }
for side in before narrow wide wide narrow before; do
  cli=build/gpu-$side/tools/resident/resident; [ $side = wide ] && cli=build/gpu/tools/resident/resident
  timeout 50 $cli bench pipeline --sizes 20,22,24,26 --repeat 3 --json $L/pipeline-$side-$SECONDS.json > $L/pipeline-$side-$SECONDS.log 2>&1 || echo "pipeline $side failed"
done
for f in $L/pipeline-*.json; do python3 -c "
import json;d=json.load(open('$f'));print('$(basename $f)','sum',[(r['log2_n'],round(r['sum_rate_over_memcpy_rate'],3),round(r['sum_rate_over_memcpy_rate_min'],3)) for r in d['rows']],'fused',[round(r['fused_over_memcpy'],3) for r in d['rows']])"; done
echo "bench $((SECONDS-t0)) s"
timeout 100 build/gpu/bench/map_shapes 20 22 24 > $L/map_shapes.log 2>&1; echo "map_shapes rc $? $((SECONDS-t0)) s"
grep -E "sweep 3|sum  (library|wave block 256 U4 8/SM|wave block 1024 U4 2/SM|slots)" $L/map_shapes.log | tail -16
timeout 100 build/gpu/tests/test_fuse --gtest_filter='*/cuda:-*beyond_32_bit*' > $L/test_fuse.log 2>&1; echo "test_fuse rc=$? $((SECONDS-t0)) s"
grep -E "PASSED|FAILED|Failure" $L/test_fuse.log | head -10
tar czf $OUT/logs.tgz -C $OUT logs && rm -rf $L
