#!/usr/bin/env bash
# Session 8 call 3: the whole test suite at 0927c51; the map at 2^26 / 2^28 with dependent launch let go
# before the wait (after) against the wait first (before = 2a7b6c5), alternated, and without dependent
# launch; torch.compile's kernel (source, PTX math, time); bench stream with five repetitions.
set -uo pipefail
L=$OUT/logs; mkdir -p $L
t0=$SECONDS
b() { cmake -S $1 -B $2 -G Ninja -DRESIDENT_CUDA=ON -DCMAKE_BUILD_TYPE=Release > $L/configure-$3.log 2>&1 && cmake --build $2 -j 16 ${@:4} > $L/build-$3.log 2>&1 || { tail -40 $L/build-$3.log; tar czf $OUT/logs.tgz -C $OUT logs; exit 1; }; }
b . build/gpu after
b .session/before build/gpu-before before --target resident_cli
echo "build $((SECONDS-t0)) s"
timeout 240 ctest --test-dir build/gpu --output-on-failure -j 4 > $L/tests.log 2>&1
echo "tests rc $? $((SECONDS-t0)) s: $(grep -E 'tests passed|tests failed' $L/tests.log)"
grep -E "\*\*\*Failed|FAILED  \]|Timeout" $L/tests.log | head -20
for r in 1 2; do for side in before after; do
  cli=build/gpu/tools/resident/resident; [ $side = before ] && cli=build/gpu-before/tools/resident/resident
  timeout 60 $cli bench pipeline --sizes 26,28 --repeat 3 --json $L/pipeline-$side-$r.json > $L/pipeline-$side-$r.log 2>&1 || echo "pipeline $side $r failed"
  echo "$side $r: $(grep -A4 'Spread over' $L/pipeline-$side-$r.log | tail -2 | awk '{print $1, $2, $3, $4, $5}' | tr '\n' ';')"
done; done
RESIDENT_PDL=0 timeout 60 build/gpu/tools/resident/resident bench pipeline --sizes 26,28 --repeat 3 --json $L/pipeline-nopdl.json > $L/pipeline-nopdl.log 2>&1
echo "no pdl: $(grep -A4 'Spread over' $L/pipeline-nopdl.log | tail -2 | awk '{print $1, $2, $3, $4, $5}' | tr '\n' ';')"
echo "A/B $((SECONDS-t0)) s"
TORCHINDUCTOR_CACHE_DIR=$OUT/inductor TRITON_CACHE_DIR=$OUT/triton timeout 120 python3 .session/torch_kernel.py $OUT > $L/torch_kernel.log 2>&1; echo "torch rc $?"; grep -vE "^\s*$" $L/torch_kernel.log | head -60
rm -rf $OUT/inductor $OUT/triton
timeout 150 build/gpu/tools/resident/resident bench stream --size 4GiB --pool-limit 1GiB --reps 5 --json $L/stream.json > $L/stream.log 2>&1; echo "stream rc $? $((SECONDS-t0)) s"
grep -E "^  (measure|streamed|pinned duplex copies: upload)" $L/stream.log
echo "total $((SECONDS-t0)) s"
tar czf $OUT/logs.tgz -C $OUT logs && rm -rf $L
