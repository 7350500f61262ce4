#!/usr/bin/env bash
# Issue 19's MTP proposer on DeepSeek-V3's layout: the deepseek3-2b synth preset (16 layers
# and one multi-token prediction module, random weights; PRESET=qwen35-2b: Qwen3.5's hybrid
# with its module) in Q8_0, 2 threads: single-stream
# greedy output without and with '{"method": "mtp", "num_speculative_tokens": K}', in
# alternating pairs (loom bench offline). Random weights make the module's proposals (almost)
# never right: what this measures is what the module costs, not what it saves. Each line
# gives output tokens/s over the decode steps, the target's and the module's forward time, and
# the proposals.
#   LOOM=build/loom REPS=3 K=2 [PRESET=deepseek3-2b] bench/mtp.sh
set -euo pipefail
LOOM=${LOOM:-build/loom}
REPS=${REPS:-3}
K=${K:-2}
DIR=${DIR:-/tmp/loom-mtp}
THREADS=${THREADS:-2}
PRESET=${PRESET:-deepseek3-2b}
mkdir -p "$DIR"
f="$DIR/$PRESET-q8_0.gguf"
[ -f "$f" ] || "$LOOM" synth --preset "$PRESET" --type q8_0 -o "$f" >/dev/null
for rep in $(seq "$REPS"); do
  for mode in plain mtp; do
    args=(bench offline -m "$f" --num-prompts 2 --input-len 16 --output-len 128
          --max-num-seqs 1 -t "$THREADS" --temperature 0 --seed "$rep")
    [ "$mode" = mtp ] && args+=(--speculative-config
                                "{\"method\": \"mtp\", \"num_speculative_tokens\": $K}")
    echo "== run $rep $mode"
    "$LOOM" "${args[@]}" 2>/dev/null |
      grep -E "^Elapsed|^Target model|^Decode steps|^Proposer|^Speculative"
  done
done
