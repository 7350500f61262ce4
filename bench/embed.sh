#!/usr/bin/env bash
# Embedding throughput: texts per second through POST /v1/embeddings for N short texts
# (~12 tokens each), sent one per request (batch 1, one request at a time) and 16 per request
# (batch 16), on a synth qwen3 embedding model (last-token pooling); REPS runs each, medians
# printed. The model: the qwen3-0.6b preset's shape with the qwen3 tokenizer, Q8_0, served with
# --task embed.
#   LOOM=build/loom N=64 REPS=3 THREADS=2 bench/embed.sh
set -euo pipefail
LOOM=${LOOM:-build/loom}
N=${N:-64}
REPS=${REPS:-3}
THREADS=${THREADS:-2}
PRESET=${PRESET:-qwen3-0.6b}
TYPE=${TYPE:-q8_0}
PORT=${PORT:-18433}
DIR=${DIR:-/tmp/loom-embed-bench}
mkdir -p "$DIR"
f="$DIR/$PRESET-$TYPE.gguf"
[ -f "$f" ] || "$LOOM" synth --preset "$PRESET" --type "$TYPE" -o "$f" >/dev/null
"$LOOM" serve -m "$f" --task embed --port "$PORT" -t "$THREADS" --max-num-seqs 16 \
  --max-model-len 512 --disable-log-requests >"$DIR/serve.log" 2>&1 &
pid=$!
trap 'kill $pid 2>/dev/null || true' EXIT
until [ "$(curl -s -o /dev/null -w '%{http_code}' "localhost:$PORT/health")" = 200 ]; do
  kill -0 "$pid" 2>/dev/null || { cat "$DIR/serve.log"; exit 1; }
  sleep 0.05
done
python3 - "$PORT" "$N" "$REPS" <<'PY'
import json, statistics, sys, time, urllib.request
port, n, reps = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
words = "the quick brown fox jumps over a lazy dog while seven wizards quietly judge boxing".split()
texts = [" ".join(words[(i + k) % len(words)] for k in range(10)) + f" #{i}" for i in range(n)]
def post(inputs):
    req = urllib.request.Request(f"http://127.0.0.1:{port}/v1/embeddings",
                                 data=json.dumps({"input": inputs, "encoding_format": "base64"}).encode(),
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req) as r:
        body = json.load(r)
    assert len(body["data"]) == len(inputs)
    return body["usage"]["prompt_tokens"]
post(texts[:2])  # warm-up
for batch in (1, 16):
    rates = []
    for _ in range(reps):
        t0 = time.perf_counter()
        tokens = sum(post(texts[i:i + batch]) for i in range(0, n, batch))
        dt = time.perf_counter() - t0
        rates.append(n / dt)
        print(f"batch {batch:2d}: {n} texts ({tokens} tokens) in {dt:.2f} s = {n / dt:.1f} texts/s", flush=True)
    print(f"batch {batch:2d}: median {statistics.median(rates):.1f} texts/s over {reps} runs", flush=True)
PY
