#!/usr/bin/env bash
# Issue 16's start-up at full size: a MoE file of Qwen3-30B-A3B's shape (the qwen3moe-30b
# preset: 30.5B parameters, 3.0B active; 16 GiB at Q4_K; synth takes ~22 min on 2 cores),
# `loom serve` with its default KV sizing, from a cold page cache (COLD=1 drops it: root
# only) or a warm one: seconds to /health 200, then five 16-token greedy completions (the
# first ones run while the kernel-ready copies are made in the background), the process's
# resident memory, and what the server logged about loading and its KV cache.
#   LOOM=build/loom COLD=1 bench/moe_startup.sh
# MEM_LIMIT=3G runs the server in a memory cgroup of that size (root; cgroup v1 or v2; the page
# cache it reads is charged to it too, so with COLD=1): a machine with less memory than a file
# and its copies together, at a size that synthesizes in a minute. N and TOKENS: how many
# completions, of how many tokens (after IDLE seconds without any); SERVE_ARGS: more flags for
# `loom serve`.
#   LOOM=build/loom PRESET=qwen3moe-2b TYPE=q8_0 MEM_LIMIT=3G COLD=1 N=20 bench/moe_startup.sh
# MODEL serves that GGUF file or Hugging Face directory instead of the synth file; PROMPT is the
# completions' prompt as JSON (token ids for a checkpoint without a tokenizer), e.g. the
# checkpoint bench/hf_moe_checkpoint.py writes:
#   python3 bench/hf_moe_checkpoint.py /tmp/loom-hf/qwen3moe-2b
#   LOOM=build/loom MODEL=/tmp/loom-hf/qwen3moe-2b PROMPT='[1, 2, 3]' COLD=1 bench/moe_startup.sh
set -euo pipefail
LOOM=${LOOM:-build/loom}
PORT=${PORT:-18432}
DIR=${DIR:-/tmp/loom-big}
PRESET=${PRESET:-qwen3moe-30b}
TYPE=${TYPE:-q4_k}
mkdir -p "$DIR"
f=${MODEL:-$DIR/$PRESET-$TYPE.gguf}
[ -e "$f" ] || "$LOOM" synth --preset "$PRESET" --type "$TYPE" -o "$f"
if [ "${COLD:-0}" = 1 ]; then sync; echo 3 >/proc/sys/vm/drop_caches; fi
cg=
if [ -n "${MEM_LIMIT:-}" ]; then
  if line=$(grep -E '^[0-9]+:([^:]*,)?memory(,[^:]*)?:' /proc/self/cgroup); then
    cg=/sys/fs/cgroup/memory${line##*:}/loom-bench limit_file=memory.limit_in_bytes
  else
    line=$(grep '^0::' /proc/self/cgroup)
    cg=/sys/fs/cgroup${line##*:}/loom-bench limit_file=memory.max
  fi
  mkdir -p "$cg"
  echo "$MEM_LIMIT" >"$cg/$limit_file"
  echo "memory cgroup $cg: $(cat "$cg/$limit_file") bytes"
fi
t0=$(date +%s.%N)
# The shell joins the cgroup (when there is one), then becomes the server: $! is the server.
sh -c '[ -z "$1" ] || echo $$ >"$1/cgroup.procs"; shift; exec "$@"' sh "$cg" \
  "$LOOM" serve -m "$f" --port "$PORT" -t 2 --max-model-len 4096 ${SERVE_ARGS:-} \
  >"$DIR/serve.log" 2>&1 &
pid=$!
# The largest anonymous memory the server holds (RssAnon, sampled every 50 ms): what the page
# cache cannot take back (copies, KV cache, what the loader made), unlike the file's pages.
peak_file=$(mktemp)
(
  peak=0
  while a=$(awk '/^RssAnon/ {print $2}' "/proc/$pid/status" 2>/dev/null) && [ -n "$a" ]; do
    if [ "$a" -gt "$peak" ]; then peak=$a; echo "$peak" >"$peak_file"; fi
    sleep 0.05
  done
) &
until [ "$(curl -s -o /dev/null -w '%{http_code}' "localhost:$PORT/health")" = 200 ]; do
  kill -0 "$pid" 2>/dev/null || { tail -3 "$DIR/serve.log"; exit 1; }
  sleep 0.05
done
t1=$(date +%s.%N)
echo "health 200 after $(echo "$t1 - $t0" | bc) s"
# IDLE=S: S seconds without requests first (an idle server's memory while its copies are made).
sleep "${IDLE:-0}"
TOKENS=${TOKENS:-16}
for n in $(seq "${N:-5}"); do
  a=$(date +%s.%N)
  curl -s "localhost:$PORT/v1/completions" -H 'Content-Type: application/json' \
    -d '{"prompt": '"${PROMPT:-\"Hello\"}"', "max_tokens": '"$TOKENS"', "temperature": 0, "ignore_eos": true}' \
    >/dev/null
  b=$(date +%s.%N)
  echo "completion $n at $(echo "$a - $t0" | bc) s: $TOKENS tokens in $(echo "$b - $a" | bc) s"
done
ps -o rss= -p "$pid" | awk '{printf "resident %.2f GiB\n", $1 / 1048576}'
awk '{printf "peak anonymous memory %.2f GiB\n", $1 / 1048576}' "$peak_file"
rm -f "$peak_file"
if [ -n "$cg" ]; then
  for k in memory.max_usage_in_bytes memory.peak; do
    [ -f "$cg/$k" ] && awk -v k="$k" '{printf "cgroup %s %.2f GiB\n", k, $1 / 1073741824}' "$cg/$k"
  done
fi
kill "$pid"; wait "$pid" 2>/dev/null || true
[ -z "$cg" ] || rmdir "$cg" 2>/dev/null || true
grep -E "kernel-ready weights|made at load|  KV cache  |] loaded |committed|did not fit|made in the background in" "$DIR/serve.log" || true
