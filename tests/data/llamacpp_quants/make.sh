#!/usr/bin/env bash
# How the files here were made (the record; rerunning it needs llama.cpp built as
# bench/llamacpp_logits.sh builds it, and a loom build):
#  1. `loom synth --preset tiny-k` writes a small random-weight llama model in F32 (every
#     matrix row a multiple of 256 columns);
#  2. llama.cpp's own llama-quantize quantizes it to each TYPE below: the quantized blocks in
#     these files are llama.cpp's, not loom's;
#  3. llama.cpp (bench/llamacpp/logits.cpp with LOGITS_OUT) runs the token ids in ids.txt as
#     one batch and writes its logits, float32 [24][vocab], to TYPE.logits.f32.
# tests/model/llamacpp_quant_files_test.cpp checks loom's logits on each file against those.
#   LLAMACPP_DIR=/tmp/llcpp LOOM=build/loom tests/data/llamacpp_quants/make.sh [TYPE...]
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
LOOM=${LOOM:-build/loom}
WORK=${LLAMACPP_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/loom/llama.cpp}
OUT=${OUT:-/tmp/loom-llamacpp-logits}
tool="$OUT/llamacpp_logits"
[ -x "$tool" ] || { echo "run bench/llamacpp_logits.sh first (it builds $tool)" >&2; exit 1; }
types=("$@")
[ ${#types[@]} -gt 0 ] || types=(IQ4_NL IQ4_XS Q3_K_M Q2_K TQ1_0 TQ2_0)
src="$OUT/fixture-tiny-k-f32.gguf"
"$LOOM" synth --preset tiny-k --seed 11 -o "$src" >/dev/null
read -r -a ids <"$HERE/ids.txt"
for t in "${types[@]}"; do
  "$WORK/build/bin/llama-quantize" "$src" "$HERE/$t.gguf" "$t" >"$OUT/fixture-quantize.log" 2>&1
  vocab=$("$LOOM" inspect "$HERE/$t.gguf" | awk '$1 == "token_embd.weight" {gsub(/[][,]/, " "); print $4}')
  zeros="$OUT/fixture-zeros.f32"
  head -c $((4 * vocab * ${#ids[@]})) /dev/zero >"$zeros"
  LOGITS_OUT="$HERE/$t.logits.f32" "$tool" "$HERE/$t.gguf" "$zeros" "$vocab" 0 "${ids[@]}" >/dev/null
  echo "$t: $(stat -c %s "$HERE/$t.gguf") bytes, vocab $vocab"
done
