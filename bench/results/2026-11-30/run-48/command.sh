#!/usr/bin/env bash
# Session 9 call 6: reductions loading through the read-only path alone (blocks of 256 at full
# occupancy as before) against 8849720, A B B A (the warm machine's build folders).
set -uo pipefail
L=$OUT/logs; mkdir -p $L
t0=$SECONDS
cmake --build build/gpu -j 16 --target resident_cli > $L/build-after.log 2>&1 || { tail -30 $L/build-after.log; exit 1; }
echo "build $((SECONDS-t0)) s"
for side in before after after before; do
  cli=build/gpu/tools/resident/resident; [ $side = before ] && cli=build/gpu-before/tools/resident/resident
  timeout 40 $cli bench pipeline --sizes 20,22,24,26 --repeat 3 --json $L/pipeline-$side-$SECONDS.json > $L/pipeline-$side-$SECONDS.log 2>&1 || echo "pipeline $side failed"
done
for f in $L/pipeline-*.json; do python3 -c "
import json;d=json.load(open('$f'));print('$(basename $f)',[(r['log2_n'],round(r['sum_rate_over_memcpy_rate'],3),round(r['sum_rate_over_memcpy_rate_min'],3)) for r in d['rows']])"; done
echo "total $((SECONDS-t0)) s"
tar czf $OUT/logs.tgz -C $OUT logs && rm -rf $L
