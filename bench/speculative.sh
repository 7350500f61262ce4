#!/usr/bin/env bash
# Issue 19's speed check on the llama-0.5b preset (PRESET), Q8_0 and Q4_0 (TYPES), 2 threads:
#  1. the cost of a verify step of 5 tokens ÷ a decode step, alone and for 16 sequences
#     (loom bench model --verify 5 --batch-seqs 16);
#  2. single-stream output tokens/s without and with n-gram speculation (k = 4, lookups of
#     2..4 tokens), in alternating pairs, on two workloads (loom bench offline):
#     - self-repeat: each random prompt P is continued greedily to C (untimed), then P + C + P
#       is decoded greedily: output that can repeat its own earlier text;
#     - random: random prompts sampled at temperature 1, where lookups (almost) never match;
#  3. the target model as its own draft (--model-draft, k = 4, greedy): tokens/s counting only
#     the target's forward time, the draft's time reported beside it. The draft names the
#     target's file, so it runs on the target's loaded weights ("self-draft"); "copy-draft"
#     names a copy of the file, which loads a second set of weights as any other draft does.
# Every line gives output tokens/s over the whole run, over its decode steps (the steps that
# ran no prompt token: what speculation changes; prefill is the same in both runs) and over
# the target's forward time.
#   LOOM=build/loom REPS=3 [VREPS=9] bench/speculative.sh   (VREPS: the verify cost's repetitions)
# Another preset (a hybrid one too), or without part 3 (SELF_DRAFT=0):
#   PRESET=qwen35-2b TYPES=q8_0 SELF_DRAFT=0 LOOM=build/loom REPS=2 bench/speculative.sh
set -euo pipefail
LOOM=${LOOM:-build/loom}
REPS=${REPS:-3}
DIR=${DIR:-/tmp/loom-spec}
THREADS=${THREADS:-2}
PRESET=${PRESET:-llama-0.5b}
TYPES=${TYPES:-q8_0 q4_0}
SELF_DRAFT=${SELF_DRAFT:-1}
SPEC='{"method": "ngram", "num_speculative_tokens": 4, "prompt_lookup_max": 4, "prompt_lookup_min": 2}'
mkdir -p "$DIR"

report() {  # label, then the bench offline output on stdin
  local out tps decode target draft acc prop
  out=$(cat)
  tps=$(echo "$out" | sed -n 's/.* \([0-9.]*\) output tokens\/s$/\1/p')
  decode=$(echo "$out" | sed -n 's/^Decode steps .*(\([0-9.]*\) tokens\/s)$/\1/p')
  target=$(echo "$out" | sed -n 's/^Target model forward passes: .*(\([0-9.]*\) output tokens\/s of that time)/\1/p')
  draft=$(echo "$out" | sed -n 's/^Proposer forward passes (draft model or MTP module): \([0-9.]*\) s.*/, draft \1 s/p')
  prop=$(echo "$out" | sed -n 's/^Proposers: .*(\([0-9.]*%\) of the decode steps.*/, proposers \1 of decode time/p')
  acc=$(echo "$out" | sed -n 's/.*(acceptance rate \([0-9.]*\), mean acceptance length \([0-9.]*\)).*/, acceptance \1, length \2/p')
  echo "$1: $tps tok/s, decode $decode tok/s, target-time $target tok/s$draft$acc$prop"
}

for type in $TYPES; do
  f="$DIR/$PRESET-$type.gguf"
  [ -f "$f" ] || "$LOOM" synth --preset "$PRESET" --type "$type" -o "$f" >/dev/null
  echo "== $PRESET $type: verify cost"
  # A verify step costs milliseconds and the host drifts: many short alternating repetitions.
  "$LOOM" bench model -m "$f" -p 0 -n 64 --verify 5 --batch-seqs 16 -r "${VREPS:-9}" -t "$THREADS" |
    grep -E "^verify step cost|^\| .* tg64 "
  for workload in self-repeat random; do
    for rep in $(seq "$REPS"); do
      for mode in plain ngram; do
        args=(bench offline -m "$f" --num-prompts 4 --input-len 64 --output-len 128
              --max-num-seqs 1 -t "$THREADS" --workload "$workload" --seed "$rep")
        [ "$mode" = ngram ] && args+=(--speculative-config "$SPEC")
        "$LOOM" "${args[@]}" 2>/dev/null | report "$type $workload run $rep $mode"
      done
    done
  done
  [ "$SELF_DRAFT" = 1 ] || continue
  copy="$DIR/copy-of-$PRESET-$type.gguf"
  [ -f "$copy" ] || cp "$f" "$copy"
  for rep in $(seq "$REPS"); do
    for mode in plain self-draft copy-draft; do
      args=(bench offline -m "$f" --num-prompts 2 --input-len 16 --output-len 256
            --max-num-seqs 1 -t "$THREADS" --temperature 0 --seed "$rep")
      [ "$mode" = self-draft ] && args+=(--model-draft "$f" --draft-max 4)
      [ "$mode" = copy-draft ] && args+=(--model-draft "$copy" --draft-max 4)
      "$LOOM" "${args[@]}" 2>/dev/null | report "$type draft run $rep $mode"
    done
  done
done
