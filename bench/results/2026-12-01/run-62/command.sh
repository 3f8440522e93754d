#!/usr/bin/env bash
# Session 12 call 2: sum_bisect (the library's sum against the hand-written slot sum, one difference at
# a time) at 2^20-2^26, three sweeps.
set -uo pipefail
L=$OUT/logs; mkdir -p $L
t0=$SECONDS
cmake -S . -B build/gpu -G Ninja -DRESIDENT_CUDA=ON -DCMAKE_BUILD_TYPE=Release > $L/configure.log 2>&1
cmake --build build/gpu -j 16 --target sum_bisect > $L/build.log 2>&1 || { tail -30 $L/build.log; exit 1; }
echo "build $((SECONDS-t0)) s"
timeout 300 build/gpu/bench/sum_bisect > $L/sum_bisect.log 2>&1; echo "sum_bisect rc=$? $((SECONDS-t0)) s"
cat $L/sum_bisect.log
tar czf $OUT/logs.tgz -C $OUT logs && rm -rf $L
