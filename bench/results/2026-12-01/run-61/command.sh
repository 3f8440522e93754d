#!/usr/bin/env bash
# Session 12 call 1: the code not yet run on a GPU (e16b46d, 718630a, 456b5d3, 1abb886) at 718630a:
# whole suite, memcheck over test_fuse_edges / test_fuse reductions / test_streaming CUDA cases, the
# Python package + pytest; bench stream (8 GiB over 2 GiB); bench pipeline --repeat 3 and its margins;
# map_shapes at 2^26 and 2^28 (the library's map beside hand-written shapes).
set -uo pipefail
L=$OUT/logs; mkdir -p $L
t0=$SECONDS
cd .session/s12
nvidia-smi -L > $L/host.txt 2>&1
cmake -S . -B build/gpu -G Ninja -DRESIDENT_CUDA=ON -DCMAKE_BUILD_TYPE=Release > $L/configure.log 2>&1
grep -i "dlpack" $L/configure.log
cmake --build build/gpu -j 16 > $L/build.log 2>&1 || { tail -30 $L/build.log; exit 1; }
echo "build $((SECONDS-t0)) s"
( python3 -m pip install -q --no-build-isolation --no-deps . -Ccmake.define.RESIDENT_CUDA=ON \
    -Cbuild-dir=build/python-gpu -Ccmake.define.CMAKE_CUDA_ARCHITECTURES=90 > $L/python-build.log 2>&1; echo "python build rc=$?" >> $L/python-build.log ) &
ctest --test-dir build/gpu -j 4 --output-on-failure > $L/ctest.log 2>&1; echo "ctest rc=$? $((SECONDS-t0)) s"
grep -E "tests passed|FAILED|Failed  |\*\*\*Failed|Timeout" $L/ctest.log | head -10
san() { local name=$1; shift; timeout 100 compute-sanitizer --tool memcheck --leak-check full --track-stream-ordered-races all --error-exitcode=1 "$@" > $L/san-$name.log 2>&1
  echo "memcheck $name rc=$? $(grep -Eo 'ERROR SUMMARY: [0-9]+ errors' $L/san-$name.log) $(grep -Eo 'PASSED  \] [0-9]+ test' $L/san-$name.log) $((SECONDS-t0)) s"; }
san fuse-edges build/gpu/tests/test_fuse_edges --gtest_filter='*/cuda'
san fuse-reduce build/gpu/tests/test_fuse --gtest_filter='*reduc*/cuda:*four_byte*/cuda'
wait; tail -1 $L/python-build.log; echo "python built $((SECONDS-t0)) s"
timeout 150 python3 -m pytest -q -rs python/tests > $L/pytest.log 2>&1; echo "pytest rc=$? $((SECONDS-t0)) s"; tail -2 $L/pytest.log
cli=build/gpu/tools/resident/resident
timeout 110 $cli bench stream --size 8GiB --pool-limit 2GiB --json $L/stream.json > $L/stream.log 2>&1; echo "stream rc=$? $((SECONDS-t0)) s"; grep -E "duplex copies: upload|hand-written|streamed" $L/stream.log | grep -v "bench stream"
left=$((580 - SECONDS + t0)); echo "left $left s"
[ $left -gt 100 ] && { timeout 90 $cli bench pipeline --repeat 3 --json $L/pipeline.json > $L/pipeline.log 2>&1; echo "pipeline rc=$? $((SECONDS-t0)) s"
  python3 bench/pipeline_targets.py $L/pipeline.json > $L/pipeline-targets.txt 2>&1; tail -12 $L/pipeline-targets.txt; }
left=$((580 - SECONDS + t0)); echo "left $left s"
[ $left -gt 80 ] && { timeout $((left - 10)) build/gpu/bench/map_shapes 26 28 > $L/map_shapes.log 2>&1; echo "map_shapes rc=$? $((SECONDS-t0)) s"; grep -E "sweep|library|flat U2 strided pdl block 128|flat U2 pdl" $L/map_shapes.log | head -30; }
left=$((580 - SECONDS + t0))
[ $left -gt 60 ] && { san streaming build/gpu/tests/test_streaming --gtest_filter='*/cuda'; }
tar czf $OUT/logs.tgz -C $OUT logs && rm -rf $L
