#!/usr/bin/env bash
# Unpacks header-only test dependencies that the GPU machine lacks (Random123) into .deps/, which is
# ignored by git; pass `carry: [".deps"]` to the device call so tests/CMakeLists.txt finds them there.
set -euo pipefail
cd "$(dirname "$0")/.."
[ -f .deps/Random123/philox.h ] && exit 0
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
(cd "$tmp" && apt-get download librandom123-dev >/dev/null && dpkg -x librandom123-dev_*.deb root)
mkdir -p .deps
cp -r "$tmp/root/usr/include/Random123" .deps/
echo "Random123 headers in .deps/Random123"
