#!/usr/bin/env bash
# Issue 14 benchmark, serving: output tokens/s of 16 concurrent streams where every request
# carries its own JSON schema (response_format json_schema, a distinct schema per request),
# against the same load without schemas, on one `loom serve`. Runs alternate (plain, schema,
# plain, schema, ...) so that both see the same machine; prints each run and the medians.
#   LOOM=build/loom REPS=3 MODEL=synth:qwen3-0.6b:q4_0 bench/structured_serve.sh
set -euo pipefail
LOOM=${LOOM:-build/loom}
REPS=${REPS:-3}
MODEL=${MODEL:-synth:qwen3-0.6b:q4_0}
PORT=${PORT:-18777}
PROMPTS=${PROMPTS:-48}
OUT_LEN=${OUT_LEN:-128}
DIR=$(mktemp -d)
trap 'kill $SERVER 2>/dev/null || true; rm -rf "$DIR"' EXIT

"$LOOM" serve -m "$MODEL" --port "$PORT" --max-num-seqs 16 --max-model-len 1024 >"$DIR/server.log" 2>&1 &
SERVER=$!
for _ in $(seq 1 600); do
  curl -sf "http://127.0.0.1:$PORT/health" >/dev/null 2>&1 && break
  sleep 0.5
done

run() {  # label, extra flags -> output tokens/s
  "$LOOM" bench serve --base-url "http://127.0.0.1:$PORT" --endpoint /v1/chat/completions \
    --random-input-len 64 --random-output-len "$OUT_LEN" --num-prompts "$PROMPTS" \
    --max-concurrency 16 --ignore-eos --no-progress --save-result --result-file "$DIR/$1.json" "${@:2}" \
    >"$DIR/$1.txt" 2>&1
  python3 -c "import json,sys; r=json.load(open(sys.argv[1])); print(r['output_throughput'], r['completed'], r['total_output_tokens'])" "$DIR/$1.json"
}

run warmup >/dev/null  # first requests page the model in; not counted
plain=() schema=()
for i in $(seq 1 "$REPS"); do
  p=$(run "plain$i"); s=$(run "schema$i" --json-schema-per-request)
  echo "run $i: plain ${p%% *} tok/s ($p) | schema per request ${s%% *} tok/s ($s)"
  plain+=("${p%% *}"); schema+=("${s%% *}")
done
python3 - "${plain[*]}" "${schema[*]}" <<'PY'
import statistics, sys
p = [float(x) for x in sys.argv[1].split()]
s = [float(x) for x in sys.argv[2].split()]
mp, ms = statistics.median(p), statistics.median(s)
print(f"median output tok/s: plain {mp:.1f}, schema per request {ms:.1f}, ratio {ms / mp:.3f}")
PY
