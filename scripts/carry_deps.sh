#!/usr/bin/env bash
# Unpacks header-only dependencies that the GPU machine lacks (Random123, DLPack) into .deps/, which is
# ignored by git; pass `carry: [".deps"]` to the device call so CMake finds them there.
set -euo pipefail
cd "$(dirname "$0")/.."
fetch() {  # fetch PACKAGE INCLUDE_SUBDIR
  [ -d ".deps/$2" ] && return 0
  local tmp
  tmp=$(mktemp -d)
  (cd "$tmp" && apt-get download "$1" >/dev/null 2>&1 && dpkg -x "$1"_*.deb root)
  mkdir -p .deps
  cp -r "$tmp/root/usr/include/$2" .deps/
  rm -rf "$tmp"
  echo "$1 headers in .deps/$2"
}
fetch librandom123-dev Random123
fetch libdlpack-dev dlpack
