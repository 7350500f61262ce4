#!/usr/bin/env bash
# Issue 17's start-up check: seconds from launching `loom serve` to /health answering 200, on
# the llama-0.5b Q8_0 preset with --max-num-seqs 16 (a 7 GiB KV cache before the quarter-of-RAM
# cap; ~6 GiB after it), from a warm page cache; REPS runs, median printed. For reference, the
# same run's time to read the file once (cat to /dev/null, warm) and what the server logged
# about loading and committing its KV cache in the background. PRESET and TYPE pick another
# synthetic model: the 8 GB check is PRESET=llama-8b TYPE=q8_0 (8.5 GB), whose loading must
# cost about one read of the file.
#   LOOM=build/loom REPS=5 bench/startup.sh
#   LOOM=build/loom REPS=3 PRESET=llama-8b TYPE=q8_0 EXTRA="--max-model-len 4096" bench/startup.sh
# (EXTRA: more `loom serve` options; the 8B preset's 128k context would not fit 16 sequences.)
set -euo pipefail
LOOM=${LOOM:-build/loom}
REPS=${REPS:-5}
PORT=${PORT:-18431}
DIR=${DIR:-/tmp/loom-startup}
mkdir -p "$DIR"
PRESET=${PRESET:-llama-0.5b}
TYPE=${TYPE:-q8_0}
EXTRA=${EXTRA:-}
f="$DIR/$PRESET-$TYPE.gguf"
[ -f "$f" ] || "$LOOM" synth --preset "$PRESET" --type "$TYPE" -o "$f" >/dev/null
cat "$f" >/dev/null  # warm the page cache
t0=$(date +%s.%N); cat "$f" >/dev/null; t1=$(date +%s.%N)
echo "read $(du -h "$f" | cut -f1) once (warm): $(echo "$t1 - $t0" | bc) s"
times=()
for i in $(seq "$REPS"); do
  start=$(date +%s.%N)
  "$LOOM" serve -m "$f" --port "$PORT" --max-num-seqs 16 $EXTRA >"$DIR/serve.log" 2>&1 &
  pid=$!
  until [ "$(curl -s -o /dev/null -w '%{http_code}' "localhost:$PORT/health")" = 200 ]; do
    kill -0 "$pid" 2>/dev/null || { cat "$DIR/serve.log"; exit 1; }
    sleep 0.01
  done
  end=$(date +%s.%N)
  times+=("$(echo "$end - $start" | bc)")
  sleep 3  # let the background commit finish, to report it
  kill "$pid"; wait "$pid" 2>/dev/null || true
  echo "run $i: ready in ${times[-1]} s; $(grep -o 'loaded .* in [0-9.]* s' "$DIR/serve.log");" \
    "$(grep -o 'KV cache: .* committed in the background in [0-9.]* s' "$DIR/serve.log" || echo 'KV still committing')"
done
printf '%s\n' "${times[@]}" | sort -n | awk '{a[NR]=$1} END {print "median ready time: " a[int((NR+1)/2)] " s"}'
