#!/usr/bin/env bash
# loom reads the quantized files llama.cpp writes: a small synth model (tiny-k: every row a
# multiple of 256; tiny-moe for MXFP4_MOE) quantized by llama.cpp's own llama-quantize to each
# type, then 24 random token ids through `loom eval` and through llama.cpp
# (bench/llamacpp/logits.cpp, built by bench/llamacpp_logits.sh), their logits compared. A
# type loom does not compute is refused by loom at load, which the table shows.
#   LLAMACPP_DIR=/tmp/llcpp LOOM=build/loom bench/llamacpp_quants.sh [TYPE...]
set -euo pipefail
LOOM=${LOOM:-build/loom}
WORK=${LLAMACPP_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/loom/llama.cpp}
OUT=${OUT:-/tmp/loom-llamacpp-logits}
HERE=$(cd "$(dirname "$0")" && pwd)
tool="$OUT/llamacpp_logits"
# shellcheck source=bench/llamacpp/compare.sh
. "$HERE/llamacpp/compare.sh"
[ -x "$tool" ] || { echo "run bench/llamacpp_logits.sh first (it builds $tool)" >&2; exit 1; }
quantize="$WORK/build/bin/llama-quantize"
[ -x "$quantize" ] || cmake --build "$WORK/build" --target llama-quantize >/dev/null
types=("$@")
[ ${#types[@]} -gt 0 ] || types=(Q4_0 Q4_1 Q5_0 Q5_1 Q8_0 Q2_K Q3_K_S Q3_K_M Q3_K_L Q4_K_S Q4_K_M
  Q5_K_S Q5_K_M Q6_K F16 BF16 IQ4_NL IQ4_XS MXFP4_MOE)
printf '| llama-quantize type | tensor types in the file | llama.cpp vs loom, max abs logit diff | max abs logit | rows with the same best token |\n| --- | --- | ---: | ---: | ---: |\n'
for t in "${types[@]}"; do
  preset=tiny-k
  [ "$t" = MXFP4_MOE ] && preset=tiny-moe
  src="$OUT/quants-$preset-f32.gguf"
  [ -f "$src" ] || "$LOOM" synth --preset "$preset" -o "$src" >/dev/null
  q="$OUT/quants-$preset-$t.gguf"
  if ! "$quantize" "$src" "$q" "$t" >"$OUT/quantize.log" 2>&1; then
    printf '| %s | llama-quantize failed: %s | | | |\n' "$t" "$(tail -1 "$OUT/quantize.log")"
    continue
  fi
  kinds=$("$LOOM" inspect "$q" 2>/dev/null | awk '/^  (blk|output|token_embd)/ {print $2}' | sort | uniq -c |
    awk '{printf "%s%s x%s", (NR > 1 ? ", " : ""), $2, $1}' || true)
  if r=$(compare_engines "$q"); then
    read -r diff logit agree rows <<<"$r"
    printf '| %s | %s | %s | %s | %s of %s |\n' "$t" "$kinds" "$diff" "$logit" "$agree" "$rows"
  else
    printf '| %s | %s | %s | | |\n' "$t" "$kinds" "$r"
  fi
done
