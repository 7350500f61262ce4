#!/usr/bin/env bash
# Concurrency sweep of `loom serve`: starts the server on the llama-0.5b preset (Q8_0 random
# weights, 2 threads), runs `loom bench serve --concurrency-sweep`, prints the
# throughput-interactivity table, and stops the server. Everything can be overridden:
#   LOOM=build-x/loom LEVELS=1,4,16 IN=256 OUT=128 bench/sweep.sh
set -euo pipefail

LOOM=${LOOM:-build/loom}
MODEL=${MODEL:-synth:llama-0.5b:q8_0}
THREADS=${THREADS:-2}
PORT=${PORT:-8199}
LEVELS=${LEVELS:-1,2,4,8,16,32}
IN=${IN:-128}
OUT=${OUT:-64}
NUM=${NUM:-8}              # requests per level at least ...
PER_SLOT=${PER_SLOT:-2}    # ... and at least PER_SLOT x concurrency
RESULT=${RESULT:-sweep-result.json}
MAX_SEQS=${MAX_SEQS:-32}

[ -x "$LOOM" ] || { echo "no loom binary at $LOOM (set LOOM=...)" >&2; exit 1; }

"$LOOM" serve -m "$MODEL" -t "$THREADS" --port "$PORT" --max-num-seqs "$MAX_SEQS" \
  --max-model-len $((IN + OUT + 64)) &
SERVER=$!
trap 'kill "$SERVER" 2>/dev/null; wait "$SERVER" 2>/dev/null || true' EXIT

# /health answers 503 while the model loads and 200 once it is ready.
for _ in $(seq 1 600); do
  if curl -sf "http://127.0.0.1:$PORT/health" >/dev/null; then break; fi
  kill -0 "$SERVER" 2>/dev/null || { echo "loom serve exited" >&2; exit 1; }
  sleep 0.5
done

set -x
"$LOOM" bench serve --base-url "http://127.0.0.1:$PORT" --dataset-name random \
  --random-input-len "$IN" --random-output-len "$OUT" --ignore-eos \
  --num-prompts "$NUM" --prompts-per-concurrency "$PER_SLOT" --concurrency-sweep "$LEVELS" \
  --percentile-metrics ttft,tpot,itl,e2el --metric-percentiles 50,99 \
  --save-result --result-file "$RESULT"
