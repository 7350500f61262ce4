#!/usr/bin/env bash
# DeepSeek-V3's layout at a size a 2-core machine runs: the deepseek3-2b synth preset (16
# layers, n_embd 1024, 16 heads of 64 + 32 with Multi-head Latent Attention over a 256 + 32
# latent row, 64 experts of width 512 in 8 groups, 6 per token, 1 shared, 1 dense layer,
# vocab 32000: 1.66B parameters, 0.30B active). Q8_0 from loom synth, Q4_K_M as
# llama-quantize builds it (synth f16, then loom quantize). loom bench model: pp512 and
# tg128, 2 threads, REPS repetitions each (medians); the roofline is the bytes a token reads
# (its 6 experts, not all 64, plus every attention and shared matrix) over the bandwidth
# measured in the same run.
#   LOOM=build/loom REPS=3 bench/deepseek.sh
set -euo pipefail
LOOM=${LOOM:-build/loom}
REPS=${REPS:-3}
DIR=${DIR:-/tmp/loom-deepseek}
mkdir -p "$DIR"
for type in q8_0 q4_k_m; do
  f="$DIR/deepseek3-2b-$type.gguf"
  if [ ! -f "$f" ]; then
    if [ "$type" = q8_0 ]; then
      "$LOOM" synth --preset deepseek3-2b --type q8_0 -o "$f" >/dev/null
    else
      "$LOOM" synth --preset deepseek3-2b --type f16 -o "$DIR/f16.tmp.gguf" >/dev/null
      "$LOOM" quantize "$DIR/f16.tmp.gguf" "$f" Q4_K_M >/dev/null
      rm -f "$DIR/f16.tmp.gguf"
    fi
  fi
  echo "== deepseek3-2b $type ($(du -h "$f" | cut -f1))"
  "$LOOM" bench model -m "$f" -p "${PP:-512}" -n 128 -r "$REPS" -t "${THREADS:-2}"
done
