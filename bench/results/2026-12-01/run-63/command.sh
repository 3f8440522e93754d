#!/usr/bin/env bash
# Session 12 call 3: sum_bisect with the library-body variants (loop shape, fold loads) at 2^20-2^26,
# three sweeps; the SASS of its kernels (cuobjdump) to compare the loops.
set -uo pipefail
L=$OUT/logs; mkdir -p $L
t0=$SECONDS
cmake -S . -B build/gpu -G Ninja -DRESIDENT_CUDA=ON -DCMAKE_BUILD_TYPE=Release > $L/configure.log 2>&1
cmake --build build/gpu -j 16 --target sum_bisect > $L/build.log 2>&1 || { tail -30 $L/build.log; exit 1; }
echo "build $((SECONDS-t0)) s"
( cuobjdump -sass build/gpu/bench/sum_bisect > $L/sum_bisect.sass 2>&1; echo "sass rc=$?" ) &
timeout 300 build/gpu/bench/sum_bisect 20 21 22 24 26 > $L/sum_bisect.log 2>&1; echo "sum_bisect rc=$? $((SECONDS-t0)) s"
wait
grep -E "sweep|library sum|hand, wide, wait|variant|kernel by hand, wide" $L/sum_bisect.log
tar czf $OUT/logs.tgz -C $OUT logs && rm -rf $L
