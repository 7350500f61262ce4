#!/usr/bin/env bash
# Issue 15's sliding-window KV check: the same KV memory with Gemma 3's window groups releasing
# blocks behind each sequence's window, and with --disable-sliding-window (every layer keeps
# the whole sequence). loom bench offline, back to back, REPS times each, alternating; prints
# each run's figures and the medians.
#   LOOM=build/loom REPS=3 bench/sliding_window_kv.sh
set -euo pipefail
LOOM=${LOOM:-build/loom}
REPS=${REPS:-3}
MODEL=${MODEL:-synth:gemma3-1b:q8_0}
ARGS=(-m "$MODEL" --num-prompts 8 --input-len 1472 --output-len 64 --max-num-seqs 8
      --max-num-batched-tokens 512 --kv-cache-memory 0.08 -t "${THREADS:-2}")
declare -A tps pre
for rep in $(seq "$REPS"); do
  for mode in windows full; do
    extra=()
    [ "$mode" = full ] && extra=(--disable-sliding-window)
    out=$("$LOOM" bench offline "${ARGS[@]}" "${extra[@]}" 2>/dev/null)
    t=$(sed -n 's/.*requests\/s, \([0-9.]*\) total tokens\/s.*/\1/p' <<<"$out")
    p=$(sed -n 's/.* \([0-9]*\) preemptions/\1/p' <<<"$out")
    echo "run $rep $mode: $t tokens/s, $p preemptions; $(grep -o '[0-9]* KV blocks of 16' <<<"$out")" \
         "$(grep 'KV group' <<<"$out" | tr -s ' ' | tr '\n' ';')"
    tps[$mode]+="$t "
    pre[$mode]+="$p "
  done
done
median() { tr ' ' '\n' | grep . | sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
w=$(median <<<"${tps[windows]}"); f=$(median <<<"${tps[full]}")
echo "median total tokens/s: windows $w, full attention $f, ratio $(awk "BEGIN {printf \"%.2f\", $w / $f}")"
echo "median preemptions: windows $(median <<<"${pre[windows]}"), full attention $(median <<<"${pre[full]}")"
