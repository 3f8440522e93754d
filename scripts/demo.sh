#!/usr/bin/env bash
# Set-up, build and run the main job: `resident demo` on the GPU if one answers, else on the CPU.
# Extra arguments go to `resident demo` (e.g. --device cpu --n 1000000 --json demo.json).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
cmake --preset auto >/dev/null
cmake --build --preset auto --target resident_cli
exec build/auto/tools/resident/resident demo "$@"
