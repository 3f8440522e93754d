#!/usr/bin/env bash
# Installs what resident builds with, from Debian's packages. Idempotent; run as root (no sudo needed)
# or as a user with sudo. Skips packages that are already present.
set -euo pipefail

packages=(
  g++ cmake ninja-build ccache pkg-config
  libgtest-dev libgmock-dev libbenchmark-dev
  libopenblas-dev libcli11-dev nlohmann-json3-dev libdlpack-dev librandom123-dev
  gnuplot-nox
  clang libclang-rt-dev libomp-dev  # the libFuzzer targets (scripts/fuzz_ci.sh)
)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "setup: all ${#packages[@]} packages present"
  exit 0
fi

echo "setup: installing ${missing[*]}"
run() { if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi; }
export DEBIAN_FRONTEND=noninteractive
run apt-get update -qq
run apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
echo "setup: done"
