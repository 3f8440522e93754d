#!/usr/bin/env bash
# Session 13 call 4: the final tree: whole suite; memcheck over the CUDA cases of test_launch_kernel (new),
# test_launch, test_linalg, test_memory, test_streaming, test_fuse_edges (gpu_check's skips); bench
# pipeline --repeat 3 and its margins; the Python package with CUDA + pytest if time is left.
set -uo pipefail
L=$OUT/logs; mkdir -p $L
t0=$SECONDS
nvidia-smi -L > $L/host.txt 2>&1
cmake -S . -B build/gpu -G Ninja -DRESIDENT_CUDA=ON -DCMAKE_BUILD_TYPE=Release > $L/configure.log 2>&1
grep -i "dlpack" $L/configure.log
cmake --build build/gpu -j 16 > $L/build.log 2>&1 || { grep -E "error" $L/build.log | head -20; exit 1; }
echo "build $((SECONDS-t0)) s"
( python3 -m pip install -q --no-build-isolation --no-deps . -Ccmake.define.RESIDENT_CUDA=ON \
    -Cbuild-dir=build/python-gpu -Ccmake.define.CMAKE_CUDA_ARCHITECTURES=90 > $L/python-build.log 2>&1; echo "python build rc=$?" >> $L/python-build.log ) &
skip='*out_of_memory*:*large_odd_shape*:*beyond_32_bit*:device_fault*:*peer.*:*graph_replay_equals_eager*:*replay_against_fp64*'
san() { local name=$1; timeout 200 compute-sanitizer --tool memcheck --leak-check full --track-stream-ordered-races all --error-exitcode=1 build/gpu/tests/$name --gtest_filter="*/cuda:-$skip" > $L/san-$name.log 2>&1
  echo "memcheck $name rc=$? $(grep -Eo 'ERROR SUMMARY: [0-9]+ errors' $L/san-$name.log) $(grep -Eo 'PASSED  \] [0-9]+ test' $L/san-$name.log) $((SECONDS-t0)) s"; }
( san test_launch_kernel; san test_launch; san test_linalg ) > $L/lane-a.txt 2>&1 &
( san test_memory; san test_streaming; san test_fuse_edges ) > $L/lane-b.txt 2>&1 &
ctest --test-dir build/gpu -j 6 --output-on-failure > $L/ctest.log 2>&1; echo "ctest rc=$? $((SECONDS-t0)) s"
grep -E "tests passed|FAILED|Failed  |\*\*\*Failed|Timeout" $L/ctest.log | head -20
wait; cat $L/lane-a.txt $L/lane-b.txt; tail -1 $L/python-build.log; echo "lanes done $((SECONDS-t0)) s"
cli=build/gpu/tools/resident/resident
left=$((570 - SECONDS + t0)); echo "left $left s"
[ $left -gt 100 ] && { timeout 90 $cli bench pipeline --repeat 3 --json $L/pipeline.json > $L/pipeline.log 2>&1; echo "pipeline rc=$? $((SECONDS-t0)) s"
  python3 bench/pipeline_targets.py $L/pipeline.json > $L/pipeline-targets.txt 2>&1; tail -12 $L/pipeline-targets.txt; }
left=$((570 - SECONDS + t0)); echo "left $left s"
[ $left -gt 40 ] && { timeout $((left - 10)) python3 -m pytest -q -rs python/tests > $L/pytest.log 2>&1; echo "pytest rc=$? $((SECONDS-t0)) s"; tail -2 $L/pytest.log; }
tar czf $OUT/logs.tgz -C $OUT logs && rm -rf $L
