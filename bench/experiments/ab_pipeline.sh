#!/usr/bin/env bash
# Compares variants of the library on `bench pipeline` in one run: the working tree, and for each PATCH
# a copy of it with that patch applied (git apply), each building the CLI; then ROUNDS rounds of
# `bench pipeline --sizes SIZES` alternating between them, so drift hits all alike.
# usage: bench/experiments/ab_pipeline.sh ROUNDS PATCH...        (SIZES=26,28 by default)
set -euo pipefail
cd "$(dirname "$0")/../.."
rounds=$1
shift
sizes=${SIZES:-26,28}
cmake -S . -B build/gpu -G Ninja -DRESIDENT_CUDA=ON -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build/gpu -j "$(nproc)" --target resident_cli >/dev/null
bins=(build/gpu/tools/resident/resident)
for patch in "$@"; do
  alt=$(mktemp -d "${TMPDIR:-/tmp}/resident-ab-$(basename "$patch" .patch)-XXXXXX")  # private: no name to plant at
  tar --exclude=./build --exclude=./.git -cf - . | tar -xf - -C "$alt"
  (cd "$alt" && git apply "$(realpath -m "$OLDPWD/$patch")")
  cmake -S "$alt" -B "$alt/build" -G Ninja -DRESIDENT_CUDA=ON -DCMAKE_BUILD_TYPE=Release >/dev/null
  cmake --build "$alt/build" -j "$(nproc)" --target resident_cli >/dev/null
  bins+=("$alt/build/tools/resident/resident")
done
for r in $(seq "$rounds"); do
  for bin in "${bins[@]}"; do
    echo "== round $r: $bin"
    "$bin" bench pipeline --sizes "$sizes" 2>/dev/null | tail -n +5
  done
done
