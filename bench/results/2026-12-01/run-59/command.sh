#!/usr/bin/env bash
# Session 11 call 5: the final commit with DLPack found (.deps in the tree): rebuild, the interop tests,
# the Python package with CUDA and pytest; then bench pipeline --repeat 3 (and its margins), bench stream
# (8 GiB over a 2 GiB pool; 4 GiB over 1 GiB), bench flow.
set -uo pipefail
L=$OUT/logs; mkdir -p $L
t0=$SECONDS
cd .session/final
cmake -S . -B build/gpu -G Ninja -DRESIDENT_CUDA=ON -DCMAKE_BUILD_TYPE=Release > $L/configure.log 2>&1
grep -i "dlpack" $L/configure.log
cmake --build build/gpu -j 16 > $L/build.log 2>&1 || { tail -30 $L/build.log; exit 1; }
echo "build $((SECONDS-t0)) s"
( python3 -m pip install -q --no-build-isolation --no-deps . -Ccmake.define.RESIDENT_CUDA=ON \
    -Cbuild-dir=build/python-gpu -Ccmake.define.CMAKE_CUDA_ARCHITECTURES=90 > $L/python-build.log 2>&1; echo "python build rc=$?" >> $L/python-build.log ) &
ctest --test-dir build/gpu -j 4 --output-on-failure > $L/ctest.log 2>&1; echo "ctest rc=$? $((SECONDS-t0)) s"
grep -E "tests passed|FAILED|Failed  |\*\*\*Failed|Timeout" $L/ctest.log | head -10
wait; tail -1 $L/python-build.log; echo "python built $((SECONDS-t0)) s"
timeout 150 python3 -m pytest -q -rs python/tests > $L/pytest.log 2>&1; echo "pytest rc=$? $((SECONDS-t0)) s"; tail -3 $L/pytest.log
cli=build/gpu/tools/resident/resident
timeout 90 $cli bench pipeline --repeat 3 --json $L/pipeline.json > $L/pipeline.log 2>&1; echo "pipeline rc=$? $((SECONDS-t0)) s"
python3 bench/pipeline_targets.py $L/pipeline.json > $L/pipeline-targets.txt 2>&1; tail -12 $L/pipeline-targets.txt
left=$((585 - SECONDS + t0)); echo "left $left s"
[ $left -gt 120 ] && { timeout 110 $cli bench stream --size 8GiB --pool-limit 2GiB --json $L/stream.json > $L/stream.log 2>&1; echo "stream rc=$? $((SECONDS-t0)) s"; grep -E "duplex copies: upload|streamed" $L/stream.log; }
left=$((585 - SECONDS + t0))
[ $left -gt 85 ] && { timeout 60 $cli bench stream --size 4GiB --pool-limit 1GiB --json $L/stream-4g.json > $L/stream-4g.log 2>&1; echo "stream 4g rc=$? $((SECONDS-t0)) s"; grep -E "duplex copies: upload|streamed" $L/stream-4g.log; }
left=$((585 - SECONDS + t0))
[ $left -gt 25 ] && { timeout 20 $cli bench flow --json $L/flow.json > $L/flow.log 2>&1; echo "flow rc=$? $((SECONDS-t0)) s"; grep -i "per stage" $L/flow.log | head -4; }
tar czf $OUT/logs.tgz -C $OUT logs && rm -rf $L
