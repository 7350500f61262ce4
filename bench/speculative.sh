#!/usr/bin/env bash
# Issue 19's speed check (n-gram speculation) on the llama-0.5b preset, Q8_0 and Q4_0, 2 threads:
#  1. the cost of a verify step of 5 tokens ÷ a decode step, alone and for 16 sequences
#     (loom bench model --verify 5 --batch-seqs 16);
#  2. single-stream output tokens/s with and without n-gram speculation (k = 4, lookups of
#     2..4 tokens) on two workloads, in alternating pairs:
#     - self-repeat: each random prompt P is continued greedily to C (untimed), then P + C + P
#       is decoded greedily: output that can repeat its own earlier text;
#     - random: random prompts sampled at temperature 1, where lookups (almost) never match.
#   LOOM=build/loom REPS=3 bench/speculative.sh
set -euo pipefail
LOOM=${LOOM:-build/loom}
REPS=${REPS:-3}
DIR=${DIR:-/tmp/loom-spec}
THREADS=${THREADS:-2}
SPEC='{"method": "ngram", "num_speculative_tokens": 4, "prompt_lookup_max": 4, "prompt_lookup_min": 2}'
mkdir -p "$DIR"
for type in q8_0 q4_0; do
  f="$DIR/llama-0.5b-$type.gguf"
  [ -f "$f" ] || "$LOOM" synth --preset llama-0.5b --type "$type" -o "$f" >/dev/null
  echo "== llama-0.5b $type: verify cost"
  "$LOOM" bench model -m "$f" -p 0 -n 32 --verify 5 --batch-seqs 16 -r "$REPS" -t "$THREADS" |
    grep -E "verify|tg32 "
  for workload in self-repeat random; do
    for rep in $(seq "$REPS"); do
      for mode in plain spec; do
        args=(bench offline -m "$f" --num-prompts 4 --input-len 64 --output-len 128
              --max-num-seqs 1 -t "$THREADS" --workload "$workload" --seed "$rep")
        [ "$mode" = spec ] && args+=(--speculative-config "$SPEC")
        out=$("$LOOM" "${args[@]}" 2>/dev/null)
        tps=$(echo "$out" | sed -n 's/.* \([0-9.]*\) output tokens\/s/\1/p')
        acc=$(echo "$out" | sed -n 's/.*(acceptance rate \([0-9.]*\), mean acceptance length \([0-9.]*\)).*/rate \1, length \2/p')
        echo "$type $workload run $rep $mode: $tps output tok/s ${acc}"
      done
    done
  done
done
