#!/usr/bin/env bash
# Session 10 call 6: run-time (JIT) reductions folding their partials with the whole last block (after,
# HEAD) against one thread folding them (before, 7f628c3): bench jit A B B A; test_jit (after) and
# memcheck / racecheck over its reductions.
set -uo pipefail
L=$OUT/logs; mkdir -p $L
t0=$SECONDS
cmake -S . -B build/gpu -G Ninja -DRESIDENT_CUDA=ON -DCMAKE_BUILD_TYPE=Release > $L/configure.log 2>&1
cmake -S .session/before -B build/gpu-before -G Ninja -DRESIDENT_CUDA=ON -DCMAKE_BUILD_TYPE=Release > $L/configure-before.log 2>&1
( cmake --build build/gpu -j 9 --target resident_cli test_jit > $L/build-after.log 2>&1 || echo "after build failed" ) &
( cmake --build build/gpu-before -j 7 --target resident_cli > $L/build-before.log 2>&1 || echo "before build failed" ) &
wait
echo "build $((SECONDS-t0)) s"
[ -x build/gpu/tools/resident/resident ] || { tail -30 $L/build-after.log; exit 1; }
for side in before after after before; do
  cli=build/gpu/tools/resident/resident; [ $side = before ] && cli=build/gpu-before/tools/resident/resident
  timeout 30 $cli bench jit --sizes 20,22,24,26 --json $L/jit-$side-$SECONDS.json > $L/jit-$side-$SECONDS.log 2>&1 || echo "jit $side failed"
done
for f in $L/jit-*.json; do python3 -c "
import json;d=json.load(open('$f'));print('$(basename $f)',[(r['log2_n'],round(r['sum_compiled_ms']*1e3,1),round(r['sum_jit_ms']*1e3,1),round(r['sum_jit_over_compiled'],3),round(r['jit_over_compiled'],3)) for r in d['rows']])"; done
echo "bench $((SECONDS-t0)) s"
timeout 60 build/gpu/tests/test_jit > $L/test_jit.log 2>&1; echo "test_jit rc=$? $((SECONDS-t0)) s"; grep -E "PASSED|FAILED|Failure" $L/test_jit.log | head
for t in memcheck racecheck; do
  extra=""; [ $t = memcheck ] && extra="--leak-check full --track-stream-ordered-races all"
  timeout 50 compute-sanitizer --tool $t $extra --error-exitcode=1 build/gpu/tests/test_jit --gtest_filter='*sums_fold*/cuda:*min_max*/cuda:*generators*/cuda' > $L/san-$t-jit.log 2>&1
  echo "$t rc=$? $(grep -Eo 'ERROR SUMMARY: [0-9]+ errors|RACECHECK SUMMARY: [0-9]+ hazards' $L/san-$t-jit.log) $((SECONDS-t0)) s"
done
tar czf $OUT/logs.tgz -C $OUT logs && rm -rf $L
