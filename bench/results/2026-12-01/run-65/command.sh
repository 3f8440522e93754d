#!/usr/bin/env bash
# Session 12 call 5: sum_bisect at 0aca93f (+ the loop variants 3-5: the library's for_each_vector in
# 32 bits, with a head given at run time, with the scalar head and tail) at 2^20-2^24; SASS of it.
set -uo pipefail
L=$OUT/logs; mkdir -p $L
t0=$SECONDS
cmake -S . -B build/gpu -G Ninja -DRESIDENT_CUDA=ON -DCMAKE_BUILD_TYPE=Release > $L/configure.log 2>&1
cmake --build build/gpu -j 16 --target sum_bisect > $L/build.log 2>&1 || { tail -30 $L/build.log; exit 1; }
echo "build $((SECONDS-t0)) s"
( cuobjdump -sass build/gpu/bench/sum_bisect > $L/sum_bisect.sass 2>&1; echo "sass rc=$?" ) &
timeout 200 build/gpu/bench/sum_bisect 20 21 22 24 > $L/sum_bisect.log 2>&1; echo "sum_bisect rc=$? $((SECONDS-t0)) s"
wait
grep -E "sweep|library|hand, wide, wait|variant: (32|lib)" $L/sum_bisect.log
tar czf $OUT/logs.tgz -C $OUT logs && rm -rf $L
