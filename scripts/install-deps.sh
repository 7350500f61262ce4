#!/usr/bin/env bash
# Installs loom's build and test dependencies from Debian 12 packages. Idempotent.
set -euo pipefail
pkgs=(
  build-essential cmake ninja-build pkg-config git
  libgtest-dev libgmock-dev libbenchmark-dev
  nlohmann-json3-dev libpcre2-dev libxxhash-dev libcli11-dev
  libboost-dev
  libcurl4-openssl-dev libssl-dev
  python3  # tests/load: the load and fault scripts (standard library only)
)
# Node.js (for the tests that drive the server with the official openai npm package):
# the machine's own nodejs ships npm; Debian's npm would conflict with it.
command -v npm >/dev/null 2>&1 || pkgs+=(nodejs npm)
# Chromium: the headless browser the web page's test drives (tests/server/webui_browser.js).
pkgs+=(chromium)
# The fuzz targets (tests/fuzz, cmake -DLOOM_FUZZ=ON): clang and its runtimes (libFuzzer,
# ASan, UBSan are in libclang-rt-dev). Only when asked: `LOOM_FUZZ=1 scripts/install-deps.sh`
# or `scripts/install-deps.sh --fuzz`.
for arg in "$@"; do [ "$arg" = "--fuzz" ] && LOOM_FUZZ=1; done
if [ "${LOOM_FUZZ:-0}" = "1" ]; then
  pkgs+=(clang libclang-rt-dev)
fi
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
# The web chat page's libraries (marked, DOMPurify, highlight.js), pinned by
# web/package-lock.json; CMake builds them into the binary (web/webui.cmake).
web_dir="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)/web"
(cd "$web_dir" && npm ci --no-audit --no-fund)
