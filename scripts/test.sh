#!/usr/bin/env bash
# Builds loom and runs the whole test suite (what CI runs). Usage: scripts/test.sh
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
# In CI (CI=true) a compiler warning fails the build: the build is warning-free, and stays so.
werror=OFF
if [ "${CI:-}" = true ]; then werror=ON; fi
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DLOOM_WERROR="$werror" >/dev/null
cmake --build build -j"$(nproc)"
ctest --test-dir build -j"$(nproc)" --output-on-failure --timeout 900
