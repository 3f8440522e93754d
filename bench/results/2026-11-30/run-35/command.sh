#!/usr/bin/env bash
# Session call 3: the map's fixed instructions trimmed (library vs by-hand shapes, bench pipeline x3),
# run-time kernels, Python stages at large n, streaming under the sanitizers.
set -uo pipefail
L=$OUT/logs; mkdir -p $L
t0=$SECONDS
cmake -S . -B build/gpu -G Ninja -DRESIDENT_CUDA=ON -DCMAKE_BUILD_TYPE=Release > $L/configure.log 2>&1
cmake --build build/gpu -j 16 --target test_fuse test_jit test_streaming resident_cli map_shapes > $L/build.log 2>&1 || { tail -50 $L/build.log; tar czf $OUT/logs.tgz -C $OUT logs; exit 1; }
echo "build $((SECONDS-t0)) s"
( python3 -m pip install -q --no-build-isolation --no-deps . -Ccmake.define.RESIDENT_CUDA=ON \
    -Cbuild-dir=build/python-gpu -Ccmake.define.CMAKE_CUDA_ARCHITECTURES=90 > $L/pip.log 2>&1; echo "pip rc $?" >> $L/pip.log ) &
ppid=$!
for t in test_fuse test_jit; do
  timeout 120 build/gpu/tests/$t > $L/$t.log 2>&1; echo "$t rc $? $(grep -E 'PASSED|FAILED' $L/$t.log | tr '\n' ' ')"
done
timeout 150 build/gpu/bench/map_shapes 22 24 26 28 > $L/map_shapes.log 2>&1; echo "map_shapes rc $? $((SECONDS-t0)) s"
grep -E "sweep|library|strided pdl block 128|pdl, ldg, CUB|sum  library|U4 4/SM" $L/map_shapes.log | head -60
wait $ppid; tail -1 $L/pip.log
timeout 100 python3 bench/peers/python_stages.py --json $L/python_stages.json > $L/python_stages.log 2>&1; echo "python_stages rc $?"; cat $L/python_stages.log | tail -6
timeout 60 build/gpu/tools/resident/resident bench jit --json $L/jit.json > $L/jit.log 2>&1; echo "bench jit rc $?"; tail -7 $L/jit.log
timeout 150 build/gpu/tools/resident/resident bench pipeline --repeat 3 --json $L/pipeline.json > $L/pipeline.log 2>&1; echo "pipeline rc $? $((SECONDS-t0)) s"; tail -40 $L/pipeline.log
echo "total $((SECONDS-t0)) s"
tar czf $OUT/logs.tgz -C $OUT logs && rm -rf $L
