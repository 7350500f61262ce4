# Sourced by bench/llamacpp_synth.sh and bench/llamacpp_quants.sh: one GGUF file through loom
# and through llama.cpp on the same 24 random token ids.
#   compare_engines GGUF   (needs LOOM, OUT and tool = the built bench/llamacpp/logits.cpp)
# Prints "DIFF LOGIT AGREE ROWS" (largest absolute logit difference, largest logit, rows with
# the same best token, rows) and returns 0; or prints "loom refuses: ..." / "llama.cpp
# failed: ..." and returns 1.
compare_engines() {
  local gguf=$1 ids vocab r
  ids=$(python3 -c "import random; r = random.Random(7); print(' '.join(str(r.randrange(3, 500)) for _ in range(24)))")
  # shellcheck disable=SC2086
  if ! "$LOOM" eval -m "$gguf" --tokens "$ids" --logits-out "$OUT/compare-loom.f32" -t 2 \
      >"$OUT/compare-eval.log" 2>&1; then
    echo "loom refuses: $(grep -m1 -iE 'error|unsupported|cannot' "$OUT/compare-eval.log" | cut -c1-160)"
    return 1
  fi
  vocab=$(( $(stat -c %s "$OUT/compare-loom.f32") / 4 / 24 ))
  # shellcheck disable=SC2086
  if ! r=$("$tool" "$gguf" "$OUT/compare-loom.f32" "$vocab" 0 $ids 2>"$OUT/compare.err"); then
    echo "llama.cpp failed: $(grep -m1 -iE 'error|assert|fail' "$OUT/compare.err" || tail -1 "$OUT/compare.err")"
    return 1
  fi
  local _ diff logit agree rows
  read -r _ diff _ logit _ agree _ rows <<<"$(head -1 <<<"$r")"
  echo "$diff $logit $agree $rows"
}
