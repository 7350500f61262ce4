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
  ids=$(python3 -c "import random; r = random.Random(7); print(' '.join(str(r.randrange(3, 500)) for _ in range(24)))")
  "$LOOM" eval -m "$gguf" --tokens "$ids" --logits-out "$OUT/synth-loom.f32" -t 2 >/dev/null 2>&1
  vocab=$(( $(stat -c %s "$OUT/synth-loom.f32") / 4 / 24 ))
  # shellcheck disable=SC2086
  if r=$("$tool" "$gguf" "$OUT/synth-loom.f32" "$vocab" 0 $ids 2>"$OUT/synth.err"); then
    read -r _ diff _ logit _ agree _ rows <<<"$(head -1 <<<"$r")"
    printf '| %s | %s | %s | %s of %s |\n' "$spec" "$diff" "$logit" "$agree" "$rows"
  else
    printf '| %s | llama.cpp failed: %s | | |\n' "$spec" "$(grep -m1 -iE 'error|assert|fail' "$OUT/synth.err" || tail -1 "$OUT/synth.err")"
  fi
done
