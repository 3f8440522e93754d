#!/usr/bin/env bash
# Session 11 call 4: the final commit's tests: whole suite, the Python package with CUDA and its tests,
# memcheck over test_streaming's CUDA cases and over test_fuse's reductions; the host's CPU and NUMA layout.
set -uo pipefail
L=$OUT/logs; mkdir -p $L
t0=$SECONDS
cd .session/final
{ nvidia-smi -L; lscpu; nvidia-smi topo -m; command -v numactl >/dev/null && numactl -H; cat /sys/class/pci_bus/*/device/numa_node 2>/dev/null | sort | uniq -c; } > $L/host.txt 2>&1
cmake -S . -B build/gpu -G Ninja -DRESIDENT_CUDA=ON -DCMAKE_BUILD_TYPE=Release > $L/configure.log 2>&1
cmake --build build/gpu -j 16 > $L/build.log 2>&1 || { tail -30 $L/build.log; exit 1; }
echo "build $((SECONDS-t0)) s"
( python3 -m pip install -q --no-build-isolation --no-deps . -Ccmake.define.RESIDENT_CUDA=ON \
    -Cbuild-dir=build/python-gpu -Ccmake.define.CMAKE_CUDA_ARCHITECTURES=90 > $L/python-build.log 2>&1; echo "python build rc=$?" >> $L/python-build.log ) &
ctest --test-dir build/gpu -j 4 --output-on-failure > $L/ctest.log 2>&1; echo "ctest rc=$? $((SECONDS-t0)) s"
grep -E "tests passed|FAILED|Failed  |\*\*\*Failed|Timeout" $L/ctest.log | head -10
wait; tail -1 $L/python-build.log; echo "python built $((SECONDS-t0)) s"
timeout 150 python3 -m pytest -q -rs python/tests > $L/pytest.log 2>&1; echo "pytest rc=$? $((SECONDS-t0)) s"; tail -3 $L/pytest.log
timeout 90 compute-sanitizer --tool memcheck --leak-check full --track-stream-ordered-races all --error-exitcode=1 build/gpu/tests/test_streaming --gtest_filter='*/cuda' > $L/san-memcheck-streaming.log 2>&1
echo "memcheck streaming rc=$? $(grep -Eo 'ERROR SUMMARY: [0-9]+ errors' $L/san-memcheck-streaming.log) $((SECONDS-t0)) s"
timeout 60 compute-sanitizer --tool memcheck --leak-check full --track-stream-ordered-races all --error-exitcode=1 build/gpu/tests/test_fuse --gtest_filter='*reduc*/cuda:*four_byte*/cuda' > $L/san-memcheck-reduce.log 2>&1
echo "memcheck reduce rc=$? $(grep -Eo 'ERROR SUMMARY: [0-9]+ errors' $L/san-memcheck-reduce.log) $((SECONDS-t0)) s"
tar czf $OUT/logs.tgz -C $OUT logs && rm -rf $L
