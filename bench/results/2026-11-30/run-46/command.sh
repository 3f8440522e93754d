#!/usr/bin/env bash
# Session 9 call 4: the whole suite and the Python package's tests at the final kernels; bench pipeline.
set -uo pipefail
L=$OUT/logs; mkdir -p $L
t0=$SECONDS
cmake -S . -B build/gpu -G Ninja -DRESIDENT_CUDA=ON -DCMAKE_BUILD_TYPE=Release > $L/configure.log 2>&1 && cmake --build build/gpu -j 16 > $L/build.log 2>&1 || { tail -40 $L/build.log; tar czf $OUT/logs.tgz -C $OUT logs; exit 1; }
echo "build $((SECONDS-t0)) s"
timeout 200 ctest --test-dir build/gpu --output-on-failure -j 4 > $L/tests.log 2>&1
echo "tests rc $? $((SECONDS-t0)) s: $(grep -E 'tests passed|tests failed' $L/tests.log)"
grep -E "\*\*\*Failed|FAILED  \]|Timeout" $L/tests.log | head -20
( timeout 200 python3 -m pip install -q --no-build-isolation --no-deps . -Ccmake.define.RESIDENT_CUDA=ON -Cbuild-dir=build/python-gpu -Ccmake.define.CMAKE_CUDA_ARCHITECTURES=90 -Ccmake.define.CMAKE_BUILD_PARALLEL_LEVEL=16 && timeout 120 python3 -m pytest -q -rs python/tests ) > $L/python.log 2>&1
echo "python rc $? $((SECONDS-t0)) s: $(tail -1 $L/python.log)"
timeout 90 build/gpu/tools/resident/resident bench pipeline --repeat 3 --json $L/pipeline.json > $L/pipeline.log 2>&1; echo "pipeline rc $?"; grep -A8 "Spread over" $L/pipeline.log | tail -6 | head -5
echo "total $((SECONDS-t0)) s"
tar czf $OUT/logs.tgz -C $OUT logs && rm -rf $L
