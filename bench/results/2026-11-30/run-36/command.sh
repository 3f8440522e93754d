#!/usr/bin/env bash
# Session call 4: everything built, every test, the Python suite, Python stages at large n, run-time
# kernels, streaming under memcheck (stream-ordered races) and initcheck.
set -uo pipefail
L=$OUT/logs; mkdir -p $L
t0=$SECONDS
cmake -S . -B build/gpu -G Ninja -DRESIDENT_CUDA=ON -DCMAKE_BUILD_TYPE=Release > $L/configure.log 2>&1
cmake --build build/gpu -j 16 > $L/build.log 2>&1 || { tail -50 $L/build.log; tar czf $OUT/logs.tgz -C $OUT logs; exit 1; }
echo "build $((SECONDS-t0)) s"
( python3 -m pip install -q --no-build-isolation --no-deps . -Ccmake.define.RESIDENT_CUDA=ON \
    -Cbuild-dir=build/python-gpu -Ccmake.define.CMAKE_CUDA_ARCHITECTURES=90 > $L/pip.log 2>&1; echo "pip rc $?" >> $L/pip.log ) &
ppid=$!
timeout 220 ctest --test-dir build/gpu --output-on-failure -j 4 > $L/tests.log 2>&1
echo "tests rc $? $((SECONDS-t0)) s: $(grep -E 'tests passed|tests failed' $L/tests.log)"
grep -E "\*\*\*Failed|FAILED  \]|Timeout" $L/tests.log | head -20
san() { timeout 200 compute-sanitizer --tool $1 $2 --error-exitcode=1 build/gpu/tests/test_streaming --gtest_filter='*/cuda' > $L/san-$1-test_streaming.log 2>&1
  echo "san $1 test_streaming rc $? $(grep -E 'ERROR SUMMARY|PASSED|FAILED' $L/san-$1-test_streaming.log | tr '\n' ' ' | cut -c1-200)"; }
san memcheck "--leak-check full --track-stream-ordered-races all" &
san initcheck "" &
wait $ppid; tail -1 $L/pip.log
timeout 150 python3 -m pytest -q -rs python/tests > $L/pytest.log 2>&1; echo "pytest rc $? $(tail -1 $L/pytest.log)"
timeout 100 python3 bench/peers/python_stages.py --json $L/python_stages.json > $L/python_stages.log 2>&1; echo "python_stages rc $?"; tail -3 $L/python_stages.log
timeout 60 build/gpu/tools/resident/resident bench jit --json $L/jit.json > $L/jit.log 2>&1; echo "bench jit rc $?"; tail -7 $L/jit.log
wait
echo "total $((SECONDS-t0)) s"
tar czf $OUT/logs.tgz -C $OUT logs && rm -rf $L
