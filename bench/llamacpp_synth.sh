#!/usr/bin/env bash
# The files `loom synth` writes, read by llama.cpp: each small preset (and the tiny preset under
# every dense family synth can give it) as GGUF, 24 random token ids run by loom (`loom eval`)
# and by llama.cpp (bench/llamacpp/logits.cpp, built by bench/llamacpp_logits.sh), their logits
# compared. TYPE=q8_0 (or mxfp4) writes quantized matrices: then the best tokens should agree.
#   LLAMACPP_DIR=/tmp/llcpp LOOM=build/loom bench/llamacpp_synth.sh [PRESET[:ARCH]...]
set -euo pipefail
LOOM=${LOOM:-build/loom}
TYPE=${TYPE:-f32}
HERE=$(cd "$(dirname "$0")" && pwd)
OUT=${OUT:-/tmp/loom-llamacpp-logits}
tool="$OUT/llamacpp_logits"
# shellcheck source=bench/llamacpp/compare.sh
. "$HERE/llamacpp/compare.sh"
[ -x "$tool" ] || { echo "run bench/llamacpp_logits.sh first (it builds $tool)" >&2; exit 1; }
specs=("$@")
[ ${#specs[@]} -gt 0 ] || specs=(tiny tiny-k tiny-swa tiny-qwen3 tiny-moe tiny-gpt-oss tiny-mla
  tiny-qwen35 tiny-qwen3next tiny:qwen2 tiny:gemma2 tiny:gemma3 tiny:phi3 tiny:granite
  tiny:olmo2 tiny:smollm3)
printf '| synth preset | %s: llama.cpp vs loom, max abs logit diff | max abs logit | rows with the same best token |\n| --- | ---: | ---: | ---: |\n' "$TYPE"
for spec in "${specs[@]}"; do
  preset=${spec%%:*}
  arch=()
  [ "$spec" != "$preset" ] && arch=(--arch "${spec#*:}")
  gguf="$OUT/synth-${spec/:/-}-$TYPE.gguf"
  if ! "$LOOM" synth --preset "$preset" "${arch[@]}" --type "$TYPE" -o "$gguf" >/dev/null 2>"$OUT/synth.log"; then
    printf '| %s | synth failed: %s | | |\n' "$spec" "$(tail -1 "$OUT/synth.log")"
    continue
  fi
  if r=$(compare_engines "$gguf"); then
    read -r diff logit agree rows <<<"$r"
    printf '| %s | %s | %s | %s of %s |\n' "$spec" "$diff" "$logit" "$agree" "$rows"
  else
    printf '| %s | %s | | |\n' "$spec" "$r"
  fi
done
