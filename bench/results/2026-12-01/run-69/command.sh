#!/usr/bin/env bash
# Session 13 call 3: sum_bisect 22 24 at the working tree (the library's kernels as committed, blocks of
# 256 in 32 bits reading from the first aligned vector), with the narrow loop variants 3 / 5 / 6 and the
# wide variant 6; the SASS of every kernel in it.
set -uo pipefail
L=$OUT/logs; mkdir -p $L
t0=$SECONDS
nvidia-smi -L > $L/host.txt 2>&1
cmake -S . -B build/gpu -G Ninja -DRESIDENT_CUDA=ON -DCMAKE_BUILD_TYPE=Release > $L/configure.log 2>&1
cmake --build build/gpu -j 16 --target sum_bisect > $L/build.log 2>&1 || { grep -E "error" $L/build.log | head; exit 1; }
echo "build $((SECONDS-t0)) s"
timeout 200 build/gpu/bench/sum_bisect 22 24 > $L/sum_bisect.log 2>&1; echo "sum_bisect rc=$? $((SECONDS-t0)) s"
grep -E "sweep|library|variant: (32-bit|library loop)|hand, (wide|narrow), wait" $L/sum_bisect.log | head -80
cuobjdump -sass build/gpu/bench/sum_bisect > $L/sum_bisect.sass 2>&1; echo "sass $(wc -l < $L/sum_bisect.sass) lines"
tar czf $OUT/logs.tgz -C $OUT logs && rm -rf $L
