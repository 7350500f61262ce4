#!/usr/bin/env bash
# Issue 16's start-up at full size: a MoE file of Qwen3-30B-A3B's shape (the qwen3moe-30b
# preset: 30.5B parameters, 3.0B active; 16 GiB at Q4_K; synth takes ~22 min on 2 cores),
# `loom serve` with its default KV sizing, from a cold page cache (COLD=1 drops it: root
# only) or a warm one: seconds to /health 200, then five 16-token greedy completions (the
# first ones run while the kernel-ready copies are made in the background), the process's
# resident memory, and what the server logged about loading and its KV cache.
#   LOOM=build/loom COLD=1 bench/moe_startup.sh
set -euo pipefail
LOOM=${LOOM:-build/loom}
PORT=${PORT:-18432}
DIR=${DIR:-/tmp/loom-big}
PRESET=${PRESET:-qwen3moe-30b}
TYPE=${TYPE:-q4_k}
mkdir -p "$DIR"
f="$DIR/$PRESET-$TYPE.gguf"
[ -f "$f" ] || "$LOOM" synth --preset "$PRESET" --type "$TYPE" -o "$f"
if [ "${COLD:-0}" = 1 ]; then sync; echo 3 >/proc/sys/vm/drop_caches; fi
t0=$(date +%s.%N)
"$LOOM" serve -m "$f" --port "$PORT" -t 2 --max-model-len 4096 >"$DIR/serve.log" 2>&1 &
pid=$!
until [ "$(curl -s -o /dev/null -w '%{http_code}' "localhost:$PORT/health")" = 200 ]; do
  kill -0 "$pid" 2>/dev/null || { tail -3 "$DIR/serve.log"; exit 1; }
  sleep 0.05
done
t1=$(date +%s.%N)
echo "health 200 after $(echo "$t1 - $t0" | bc) s"
for n in 1 2 3 4 5; do
  a=$(date +%s.%N)
  curl -s "localhost:$PORT/v1/completions" -H 'Content-Type: application/json' \
    -d '{"prompt": "Hello", "max_tokens": 16, "temperature": 0, "ignore_eos": true}' >/dev/null
  b=$(date +%s.%N)
  echo "completion $n at $(echo "$a - $t0" | bc) s: 16 tokens in $(echo "$b - $a" | bc) s"
done
ps -o rss= -p "$pid" | awk '{printf "resident %.2f GiB\n", $1 / 1048576}'
kill "$pid"; wait "$pid" 2>/dev/null || true
grep -E "kernel-ready weights|  KV cache  |loaded|committed|did not fit" "$DIR/serve.log" || true
