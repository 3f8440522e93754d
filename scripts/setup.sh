#!/usr/bin/env bash
# Installs what resident builds with, from Debian's packages, and the Python package's build and test
# requirements from PyPI into .venv/ (nanobind, scikit-build-core, numpy, pytest; numba for Python stages
# in resident.jit; numexpr, a peer in the CPU race). Idempotent; run as root (no sudo needed) or as a
# user with sudo. Skips what is already present.
set -euo pipefail

packages=(
  g++ cmake ninja-build ccache pkg-config
  libgtest-dev libgmock-dev libbenchmark-dev
  libopenblas-dev libcli11-dev nlohmann-json3-dev libdlpack-dev librandom123-dev
  libopenmpi-dev openmpi-bin  # the optional MPI bootstrap of dist/ and its two-process test
  gnuplot-nox doxygen python3 python3-dev python3-venv
  python3-jsonschema  # tests/cli/check_json_schema.py validates the CLI's JSON against docs/schema
  clang libclang-rt-dev libomp-dev  # the libFuzzer targets (scripts/fuzz_ci.sh)
)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "setup: all ${#packages[@]} packages present"
else
  echo "setup: installing ${missing[*]}"
  run() { if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi; }
  export DEBIAN_FRONTEND=noninteractive
  run apt-get update -qq
  run apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  echo "setup: done"
fi

# The Python package (pip install . in scripts/test.sh) builds and tests in its own environment.
cd "$(dirname "$0")/.."
python_packages=(nanobind scikit-build-core numpy pytest numba numexpr)
[ -x .venv/bin/python ] || python3 -m venv .venv
if ! .venv/bin/python -c "import nanobind, scikit_build_core, numpy, pytest, numba, numexpr" 2>/dev/null; then
  echo "setup: installing ${python_packages[*]} into .venv"
  .venv/bin/python -m pip install -q --disable-pip-version-check "${python_packages[@]}"
fi
