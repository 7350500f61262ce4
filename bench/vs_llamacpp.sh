#!/usr/bin/env bash
# loom beside llama.cpp on the same GGUF files, same host, same thread count, run back to back.
# llama.cpp comes from npm (node-llama-cpp's prebuilt CPU libraries, which pick the best ISA
# variant of ggml-cpu at load time); bench/llamacpp/bench.mjs times it the way llama-bench
# does: pp = one P-token batch from an empty context, tg = N single-token decodes, and with
# SEQS > 1 also N steps of SEQS sequences decoded together (loom's tgNxSEQS).
#   LOOM=build/loom REPS=3 SEQS=16 bench/vs_llamacpp.sh /tmp/loom-moe/qwen3moe-2b-q8_0.gguf ...
# Needs node >= 20 and the npm registry (first run only).
set -euo pipefail
LOOM=${LOOM:-build/loom}
REPS=${REPS:-3}
P=${P:-512}
N=${N:-128}
SEQS=${SEQS:-0}
THREADS=${THREADS:-2}
HERE=$(cd "$(dirname "$0")/llamacpp" && pwd)
if [ ! -d "$HERE/node_modules/node-llama-cpp" ]; then
  # --ignore-scripts: use the prebuilt libraries as published (no local source build).
  (cd "$HERE" && npm ci --ignore-scripts --omit=optional --no-audit --no-fund >/dev/null)
fi
batch=()
[ "$SEQS" -gt 1 ] && batch=(-B "$SEQS")
for f in "$@"; do
  echo "== $f ($(du -h "$f" | cut -f1)), $THREADS threads"
  "$LOOM" bench model -m "$f" -p "$P" -n "$N" "${batch[@]}" -r "$REPS" -t "$THREADS"
  node "$HERE/bench.mjs" "$f" "$THREADS" "$REPS" "$P" "$N" "$SEQS" | tail -1
done
