#!/usr/bin/env bash
# Issue 6 benchmark: `loom bench model` on the llama-0.5b preset in every weight type of the
# llama.cpp comparison (F16, BF16, Q8_0, Q4_0, Q4_K_M; others on request, e.g. q5_k_m), as GGUF
# files on disk, with 2 threads (pp512, tg128, batched decode of 16 sequences, and where each
# test's time goes: --profile) and 1 thread (tg128). Prints the markdown rows; medians of REPS
# runs after a warm-up.
#   LOOM=build/loom REPS=5 DIR=/tmp/loom-speed bench/cpu_speed.sh [types...]
set -euo pipefail
LOOM=${LOOM:-build/loom}
REPS=${REPS:-5}
DIR=${DIR:-/tmp/loom-speed}
TYPES=("$@")
[ ${#TYPES[@]} -gt 0 ] || TYPES=(f16 bf16 q8_0 q4_0 q4_k_m)
mkdir -p "$DIR"

model_file() {  # type -> path of the GGUF (made once)
  local t=$1 f="$DIR/llama-0.5b-$1.gguf"
  if [ ! -f "$f" ]; then
    if [[ "$t" == *_k_m ]]; then  # K-quant mixes (q4_k_m, q5_k_m): quantize the F16 file
      [ -f "$DIR/llama-0.5b-f16.gguf" ] || "$LOOM" synth --preset llama-0.5b --type f16 -o "$DIR/llama-0.5b-f16.gguf" >&2
      "$LOOM" quantize "$DIR/llama-0.5b-f16.gguf" "$f" "${t^^}" >&2
    else
      "$LOOM" synth --preset llama-0.5b --type "$t" -o "$f" >&2
    fi
  fi
  echo "$f"
}

for t in "${TYPES[@]}"; do
  f=$(model_file "$t")
  echo "## $t ($(du -m "$f" | cut -f1) MiB)"
  "$LOOM" bench model -m "$f" -p 512 -n 128 -B 16 -t 2 -r "$REPS" --profile
  "$LOOM" bench model -m "$f" -p 0 -n 128 -t 1 -r "$REPS" | grep -E "^\| .* \| 1 \|"
  echo
done
