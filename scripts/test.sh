#!/usr/bin/env bash
# Set-up, then build and test every configuration this machine can build:
#   cuda   both backends (when the CUDA toolkit is here; GPU cases skip, saying why, without a GPU)
#   cpu    -DRESIDENT_CUDA=OFF: the CPU backend alone, same API (not in CI when nvcc is there: the cuda
#          configuration runs the CPU cases optimized, debug runs the CUDA-less build's every case)
#   debug  CPU backend with bounds checks and ASan + UBSan (halt on the first report)
#   tsan   CPU backend under ThreadSanitizer: the multithreaded tests and the soak only
# then the consumers in tests/consumer (docs/using.md): find_package(resident) from separate projects
# against installs of the cpu build and (with nvcc) the cuda build, and add_subdirectory of the tree.
# Last, the Python package: pip install . into .venv and its pytest suite (python/tests).
# First, the quick checks: the API reference (an undocumented public symbol fails) and the figures
# the docs quote against bench/results.
set -euo pipefail
cd "$(dirname "$0")/.."
# Each part's start, in seconds since the script began, to see where CI's time goes.
section() { echo "== [${SECONDS} s] $*"; }
bash scripts/setup.sh

section "docs: figures against bench/results, API reference into build/docs"
python3 scripts/check_doc_figures.py
section "tests: public names no test mentions (docs/testing.md gives the reasons)"
python3 scripts/untested_api.py
mkdir -p build/docs  # Doxygen makes only the last folder of its output path
doxygen docs/Doxyfile

presets=(cpu debug)
nvcc=$(command -v nvcc || true)
if [ -z "$nvcc" ] && [ -x /usr/local/cuda/bin/nvcc ]; then nvcc=/usr/local/cuda/bin/nvcc; fi
if [ -n "$nvcc" ] && [ "${CI:-}" = true ]; then
  presets=(cuda debug)
elif [ -n "$nvcc" ]; then
  presets=(cuda "${presets[@]}")
else
  echo "test: no CUDA toolkit here: the cuda configuration is skipped"
fi
jobs=${JOBS:-$(nproc)}
# Paths relative to the checkout's parent in ccache's keys: the mutation check's scratch tree hits them.
export CCACHE_BASEDIR=${CCACHE_BASEDIR:-$(dirname "$PWD")}
rm -rf build/junit  # what the runs below write, read by the skip summary at the end

for p in "${presets[@]}"; do
  section "$p: configure, build, test"
  # Without a GPU (CI) the CUDA configuration leaves out the GPU-only experiments: nothing could run them,
  # and their nvcc builds took minutes (scripts/gpu_check.sh builds and runs them).
  extra=()
  if [ "$p" = cuda ] && [ "${CI:-}" = true ]; then extra=(-DRESIDENT_BUILD_BENCH=OFF); fi
  cmake --preset "$p" "${extra[@]}" >/dev/null
  cmake --build --preset "$p" -j "$jobs"
  GTEST_OUTPUT="xml:$PWD/build/junit/$p/gtest/" ctest --preset "$p" -j "$jobs" --output-junit "$PWD/build/junit/$p/ctest.xml"
done

# ThreadSanitizer over the tests that run host threads at once (label threads: the library, those
# tests and the soak, 30 s), OpenMP kept to the calling thread (docs/threads.md).
section "tsan: configure, build, test the threaded tests"
cmake --preset tsan >/dev/null
cmake --build --preset tsan -j "$jobs"
ctest --preset tsan -j "$jobs"

# Two of the CPU mutants (a fused loop's tail, the Philox key): each rebuilds every object that includes
# the header it plants a bug in, minutes on CI's two cores; scripts/gpu_check.sh runs all of them.
section "mutants: planted bugs in a scratch copy, each caught by its test (docs/testing.md)"
# On the debug configuration built above: ccache serves its unmutated objects to the scratch build.
MUTANTS_PRESET=debug bash scripts/mutants.sh fused_map_tail philox_key

# A consumer: configure, build and run its tests. consume NAME SOURCE_DIR CMAKE_ARGS...
consume() {
  local name=$1 src=$2
  shift 2
  rm -rf "build/$name"
  cmake -S "$src" -B "build/$name" -G Ninja "$@" >/dev/null
  cmake --build "build/$name" -j "$jobs"
  ctest --test-dir "build/$name" --output-on-failure
}

section "consumer: install the cpu build, then find_package(resident) from a separate project"
rm -rf build/install
if [ -d build/cpu ] && [[ " ${presets[*]} " == *" cpu "* ]]; then
  cmake --install build/cpu --prefix build/install >/dev/null
else  # the library alone, as docs/using.md installs it
  cmake --preset lib -DRESIDENT_CUDA=OFF >/dev/null
  cmake --build --preset lib -j "$jobs"
  cmake --install build/lib --prefix build/install >/dev/null
fi
consume consumer tests/consumer -DCMAKE_PREFIX_PATH="$PWD/build/install"

if [ -n "$nvcc" ]; then
  section "consumers of the cuda build: CUDA projects (CUDA enabled before and after find_package), a C++ one"
  rm -rf build/install-cuda
  cmake --install build/cuda --prefix build/install-cuda >/dev/null
  for c in cuda cuda-late; do
    consume "consumer-$c" "tests/consumer/$c" -DCMAKE_PREFIX_PATH="$PWD/build/install-cuda" \
      -DCMAKE_CUDA_COMPILER="$nvcc" -DCMAKE_CUDA_ARCHITECTURES=90
  done
  consume consumer-cuda-cxx tests/consumer -DCMAKE_PREFIX_PATH="$PWD/build/install-cuda"
fi

section "consumers: add_subdirectory of the source tree (and, with nvcc outside CI, a CUDA consumer of it)"
# In CI the CUDA consumers above cover nvcc; building the library's CUDA objects a second time took minutes.
if [ -n "$nvcc" ] && [ "${CI:-}" != true ]; then
  consume consumer-subdirectory tests/consumer/subdirectory -DRESIDENT_CUDA=ON -DCONSUMER_CUDA=ON \
    -DCMAKE_CUDA_COMPILER="$nvcc" -DCMAKE_CUDA_ARCHITECTURES=90
else
  consume consumer-subdirectory tests/consumer/subdirectory -DRESIDENT_CUDA=OFF
fi

section "fuzz: the bounded CI run of the libFuzzer targets (clang)"
if command -v clang++ >/dev/null; then bash scripts/fuzz_ci.sh 45; fi

section "python: pip install . (CPU backend here, for speed), then the pytest suite"
.venv/bin/python -m pip install -q --disable-pip-version-check --no-build-isolation . \
  -Ccmake.define.RESIDENT_CUDA=OFF -Cbuild-dir=build/python-cpu
for ex in examples/python/*.py; do .venv/bin/python "$ex"; done
# Lifetimes across the boundary (arrays, capsules, flows and graphs released in every order) under
# Python's debug allocator (freed memory poisoned, buffer ends guarded) and development mode.
PYTHONMALLOC=debug .venv/bin/python -X dev -m pytest -q -rs --junitxml=build/junit/pytest.xml python/tests

# The stage checks read Numba's typed IR, whose shape follows the bytecode of the Python running it
# (3.12 returns from each branch where 3.11 joined first): the suite again under 3.12, the GPU image's
# Python, where this machine has one.
py312=
for candidate in $(command -v python3.12 || true) "${HOME:-/nonexistent}"/.pyenv/versions/3.12*/bin/python3.12; do
  [ -f "$candidate" ] || continue
  # Only an interpreter root or this user owns and nobody else may change (not one planted on PATH),
  # that runs (not a pyenv shim) and can make a venv (Debian's python3.12 may lack ensurepip).
  owner=$(stat -Lc %u "$candidate") mode=$(stat -Lc %a "$candidate")
  { [ "$owner" = 0 ] || [ "$owner" = "$(id -u)" ]; } && [ $((8#$mode & 8#022)) -eq 0 ] || continue
  if "$candidate" -c "import venv, ensurepip" 2>/dev/null; then py312=$candidate; break; fi
done
if [ -n "$py312" ]; then
  section "python 3.12 ($py312): pip install . into .venv312, then the pytest suite"
  [ -x .venv312/bin/pip ] || { rm -rf .venv312 && "$py312" -m venv .venv312; } || { rm -rf .venv312; false; }
  .venv312/bin/python -c "import nanobind, scikit_build_core, numpy, pytest, numba" 2>/dev/null ||
    .venv312/bin/python -m pip install -q --disable-pip-version-check nanobind scikit-build-core numpy pytest numba
  .venv312/bin/python -m pip install -q --disable-pip-version-check --no-build-isolation . \
    -Ccmake.define.RESIDENT_CUDA=OFF -Cbuild-dir=build/python-cpu312
  .venv312/bin/python -m pytest -q -rs --junitxml=build/junit/pytest312.xml python/tests
else
  echo "test: no Python 3.12 here: the suite ran under $(.venv/bin/python -V) alone"
fi

section "cpu race: the seed map and map + sum, 2^16-2^20, resident against NumPy and Numba (recorded, not asserted)"
.venv/bin/python bench/peers/cpu_race.py --lo 16 --hi 20 --json build/cpu_race.json

python3 scripts/skip_summary.py build/junit
section "done"
