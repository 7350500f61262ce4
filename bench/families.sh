#!/usr/bin/env bash
# Issue 15's speed check: single-stream prompt and generation speed of each family's synth
# preset against the Llama preset, per weight byte (loom bench model reports the share of the
# memory bandwidth measured in the same run). Back to back, same machine, same threads.
#   LOOM=build/loom TYPE=q8_0 THREADS=2 REPS=3 bench/families.sh   (TYPE=q4_k_m: synth f16 + quantize)
set -euo pipefail
LOOM=${LOOM:-build/loom}
TYPE=${TYPE:-q8_0}
THREADS=${THREADS:-2}
REPS=${REPS:-3}
DIR=${DIR:-/tmp/loom-families}
mkdir -p "$DIR"
for preset in llama-0.5b gemma3-1b olmo2-1b granite-2b gemma2-2b smollm3-3b phi4-mini; do
  f="$DIR/$preset-$TYPE.gguf"
  if [ ! -f "$f" ]; then
    case "$TYPE" in
      q4_k_m|q5_k_m)  # llama-quantize's mixes: synth in f16, then loom quantize
        "$LOOM" synth --preset "$preset" --type f16 -o "$DIR/$preset-f16.tmp.gguf" >/dev/null
        "$LOOM" quantize "$DIR/$preset-f16.tmp.gguf" "$f" "${TYPE^^}" >/dev/null
        rm -f "$DIR/$preset-f16.tmp.gguf" ;;
      *) "$LOOM" synth --preset "$preset" --type "$TYPE" -o "$f" >/dev/null ;;
    esac
  fi
  echo "== $preset $TYPE"
  "$LOOM" bench model -m "$f" -p 128 -n 32 -r "$REPS" -t "$THREADS"
done
