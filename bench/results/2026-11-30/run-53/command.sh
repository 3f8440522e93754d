#!/usr/bin/env bash
# Session 10 call 5: the final commit: whole suite, the Python package with CUDA and its tests,
# memcheck / racecheck over test_fuse's reductions, bench pipeline --repeat 3, bench stream.
set -uo pipefail
L=$OUT/logs; mkdir -p $L
t0=$SECONDS
git log --oneline -1 > $L/commit.txt 2>/dev/null; nvidia-smi -L > $L/gpu.txt
cmake -S . -B build/gpu -G Ninja -DRESIDENT_CUDA=ON -DCMAKE_BUILD_TYPE=Release > $L/configure.log 2>&1
cmake --build build/gpu -j 16 > $L/build.log 2>&1 || { tail -30 $L/build.log; exit 1; }
echo "build $((SECONDS-t0)) s"
( python3 -m pip install -q --no-build-isolation --no-deps . -Ccmake.define.RESIDENT_CUDA=ON \
    -Cbuild-dir=build/python-gpu -Ccmake.define.CMAKE_CUDA_ARCHITECTURES=90 > $L/python-build.log 2>&1; echo "python build rc=$?" >> $L/python-build.log ) &
ctest --test-dir build/gpu -j 4 --output-on-failure > $L/ctest.log 2>&1; echo "ctest rc=$? $((SECONDS-t0)) s"
grep -E "tests passed|FAILED|Failed  |\*\*\*Failed|Timeout" $L/ctest.log | head -10
wait; tail -1 $L/python-build.log; echo "python built $((SECONDS-t0)) s"
timeout 150 python3 -m pytest -q -rs python/tests > $L/pytest.log 2>&1; echo "pytest rc=$? $((SECONDS-t0)) s"; tail -3 $L/pytest.log
for t in memcheck racecheck; do
  extra=""; [ $t = memcheck ] && extra="--leak-check full --track-stream-ordered-races all"
  timeout 60 compute-sanitizer --tool $t $extra --error-exitcode=1 build/gpu/tests/test_fuse --gtest_filter='*reduc*/cuda:*four_byte*/cuda' > $L/san-$t-reduce.log 2>&1
  echo "$t rc=$? $(grep -Eo 'ERROR SUMMARY: [0-9]+ errors|RACECHECK SUMMARY: [0-9]+ hazards' $L/san-$t-reduce.log) $((SECONDS-t0)) s"
done
timeout 60 build/gpu/tools/resident/resident bench pipeline --repeat 3 --json $L/pipeline.json > $L/pipeline.log 2>&1; echo "pipeline rc=$? $((SECONDS-t0)) s"
tail -9 $L/pipeline.log
left=$((570 - SECONDS + t0))
[ $left -gt 60 ] && { timeout $((left - 15)) build/gpu/tools/resident/resident bench stream --size 8GiB --pool-limit 2GiB --json $L/stream.json > $L/stream.log 2>&1; echo "stream rc=$? $((SECONDS-t0)) s"; tail -22 $L/stream.log; }
tar czf $OUT/logs.tgz -C $OUT logs && rm -rf $L
