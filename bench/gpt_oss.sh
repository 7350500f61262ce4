#!/usr/bin/env bash
# gpt-oss with MXFP4 experts (issue 16) on the gpt-oss-1b synth shape (12 layers, n_embd 1024,
# 16 query / 2 KV heads of 64, 32 experts of width 1024, 4 per token, window 128 on even
# layers, vocab 32000): the experts MXFP4, every other matrix Q8_0, routers F32, as llama.cpp's
# gpt-oss files. loom bench model: pp512, tg128 and 16 sequences decoding together, 2 threads,
# REPS repetitions each; the roofline is the bytes a token reads (its 4 experts, not all 32)
# over the bandwidth measured in the same run.
#   LOOM=build/loom REPS=3 bench/gpt_oss.sh
set -euo pipefail
LOOM=${LOOM:-build/loom}
REPS=${REPS:-3}
DIR=${DIR:-/tmp/loom-gpt-oss}
mkdir -p "$DIR"
f="$DIR/gpt-oss-1b-mxfp4.gguf"
[ -f "$f" ] || "$LOOM" synth --preset gpt-oss-1b --type mxfp4 -o "$f" >/dev/null
echo "== gpt-oss-1b mxfp4 experts ($(du -h "$f" | cut -f1))"
"$LOOM" bench model -m "$f" -p "${PROMPT:-512}" -n 128 -B 16 -r "$REPS" -t "${THREADS:-2}"
