#!/usr/bin/env bash
# Issue 17 benchmark, latency under load: TTFT and output tokens/s of 16 concurrent streams with
# ~90-token prompts on one `loom serve` (llama-0.5b preset, Q8_0, 2 threads, --max-num-seqs 16).
# With LOOM_BEFORE or BEFORE_FLAGS set, two servers (before and after a change: another binary,
# or the same one with other serve flags) are measured in alternating runs, back to back, so
# that both see the same machine; prints every run and the medians.
#   LOOM=build/loom REPS=3 BEFORE_FLAGS="--shared-prefill-tokens 0" bench/serve_latency.sh
#   LOOM=build/loom LOOM_BEFORE=/path/to/old/loom REPS=3 bench/serve_latency.sh
set -euo pipefail
LOOM=${LOOM:-build/loom}
LOOM_BEFORE=${LOOM_BEFORE:-}
BEFORE_FLAGS=${BEFORE_FLAGS:-}
AFTER_FLAGS=${AFTER_FLAGS:-}
COMPARE=""
if [ -n "$LOOM_BEFORE$BEFORE_FLAGS" ]; then COMPARE=1; LOOM_BEFORE=${LOOM_BEFORE:-$LOOM}; fi
REPS=${REPS:-3}
MODEL=${MODEL:-synth:llama-0.5b:q8_0}
THREADS=${THREADS:-2}
PROMPTS=${PROMPTS:-48}
IN_LEN=${IN_LEN:-90}
OUT_LEN=${OUT_LEN:-128}
CONCURRENCY=${CONCURRENCY:-16}
DIR=$(mktemp -d)
PIDS=()
trap 'for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done; rm -rf "$DIR"' EXIT

start() {  # name, binary, port, extra serve flags
  # shellcheck disable=SC2086
  "$2" serve -m "$MODEL" --port "$3" -t "$THREADS" --max-num-seqs 16 --max-model-len 512 \
    --disable-log-requests $4 >"$DIR/$1.log" 2>&1 &
  PIDS+=($!)
  for _ in $(seq 1 1200); do
    curl -sf "http://127.0.0.1:$3/health" >/dev/null 2>&1 && return
    sleep 0.5
  done
  echo "server $1 did not start:" && cat "$DIR/$1.log" && exit 1
}

run() {  # label, port[, prompts] -> "ttft_p50_ms ttft_p99_ms output_tok_s completed"
  "$LOOM" bench serve --base-url "http://127.0.0.1:$2" --random-input-len "$IN_LEN" \
    --random-output-len "$OUT_LEN" --num-prompts "${3:-$PROMPTS}" --max-concurrency "$CONCURRENCY" \
    --ignore-eos --no-progress --percentile-metrics ttft,tpot,e2el --metric-percentiles 50,99 \
    --seed "$RANDOM" --save-result --result-file "$DIR/$1.json" >"$DIR/$1.txt" 2>&1
  python3 -c "import json,sys; r=json.load(open(sys.argv[1])); print('%.1f %.1f %.1f %d' % (r['p50_ttft_ms'], r['p99_ttft_ms'], r['output_throughput'], r['completed']))" "$DIR/$1.json"
}

start after "$LOOM" 18811 "$AFTER_FLAGS"
if [ -n "$COMPARE" ]; then start before "$LOOM_BEFORE" 18812 "$BEFORE_FLAGS"; fi
# The first requests page the model in: one wave of each, not counted.
run warmup-after 18811 "$CONCURRENCY" >/dev/null
if [ -n "$COMPARE" ]; then run warmup-before 18812 "$CONCURRENCY" >/dev/null; fi

after=() before=()
for i in $(seq 1 "$REPS"); do
  if [ -n "$COMPARE" ]; then
    b=$(run "before$i" 18812)
    echo "run $i before: TTFT p50 / p99 ms, output tok/s, completed: $b"
    before+=("$b")
  fi
  x=$(run "after$i" 18811)
  echo "run $i after:  TTFT p50 / p99 ms, output tok/s, completed: $x"
  after+=("$x")
done
python3 - "$(printf '%s\n' "${before[@]+"${before[@]}"}")" "$(printf '%s\n' "${after[@]}")" <<'PY'
import statistics, sys
for name, block in (("before", sys.argv[1]), ("after", sys.argv[2])):
    rows = [list(map(float, l.split())) for l in block.splitlines() if l.strip()]
    if not rows:
        continue
    med = [statistics.median(r[k] for r in rows) for k in range(3)]
    print(f"median {name}: TTFT p50 {med[0]:.1f} ms, TTFT p99 {med[1]:.1f} ms, output {med[2]:.1f} tok/s")
PY
