#!/usr/bin/env bash
# Issue 16's speed check on the qwen3moe-2b shape (16 layers, n_embd 1024, 64 experts of width
# 512, 8 per token, vocab 32000): Q8_0 from loom synth, Q4_K_M as llama-quantize builds it
# (synth f16, then loom quantize). loom bench model: pp512, tg128 and 16 sequences decoding
# together, 2 threads, REPS repetitions each; the roofline is the bytes a token reads (its 8
# experts, not all 64) over the bandwidth measured in the same run.
#   LOOM=build/loom REPS=3 bench/moe.sh
set -euo pipefail
LOOM=${LOOM:-build/loom}
REPS=${REPS:-3}
DIR=${DIR:-/tmp/loom-moe}
mkdir -p "$DIR"
for type in q8_0 q4_k_m; do
  f="$DIR/qwen3moe-2b-$type.gguf"
  if [ ! -f "$f" ]; then
    if [ "$type" = q8_0 ]; then
      "$LOOM" synth --preset qwen3moe-2b --type q8_0 -o "$f" >/dev/null
    else
      "$LOOM" synth --preset qwen3moe-2b --type f16 -o "$DIR/f16.tmp.gguf" >/dev/null
      "$LOOM" quantize "$DIR/f16.tmp.gguf" "$f" Q4_K_M >/dev/null
      rm -f "$DIR/f16.tmp.gguf"
    fi
  fi
  echo "== qwen3moe-2b $type ($(du -h "$f" | cut -f1))"
  "$LOOM" bench model -m "$f" -p 512 -n 128 -B 16 -r "$REPS" -t "${THREADS:-2}"
done
