#!/usr/bin/env bash
# Set-up, then build and test every configuration this machine can build:
#   cuda   both backends (when the CUDA toolkit is here; GPU cases skip, saying why, without a GPU)
#   cpu    -DRESIDENT_CUDA=OFF: the CPU backend alone, same API
#   debug  CPU backend with bounds checks and ASan + UBSan (halt on the first report)
# plus an install of the cpu configuration used by a find_package(resident) consumer.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh

presets=(cpu debug)
if command -v nvcc >/dev/null || [ -x /usr/local/cuda/bin/nvcc ]; then
  presets=(cuda "${presets[@]}")
else
  echo "test: no CUDA toolkit here: the cuda configuration is skipped"
fi
jobs=${JOBS:-$(nproc)}

for p in "${presets[@]}"; do
  echo "== $p: configure, build, test"
  cmake --preset "$p" >/dev/null
  cmake --build --preset "$p" -j "$jobs"
  ctest --preset "$p" -j "$jobs"
done

echo "== consumer: install the cpu build, then find_package(resident) from a separate project"
rm -rf build/install build/consumer
cmake --install build/cpu --prefix build/install >/dev/null
cmake -S tests/consumer -B build/consumer -G Ninja -DCMAKE_PREFIX_PATH="$PWD/build/install" >/dev/null
cmake --build build/consumer
ctest --test-dir build/consumer --output-on-failure
if command -v clang++ >/dev/null; then echo "== fuzz: the bounded CI run"; bash scripts/fuzz_ci.sh; fi
