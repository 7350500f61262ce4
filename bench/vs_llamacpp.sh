#!/usr/bin/env bash
# loom beside llama.cpp on the same GGUF files, same host, same thread count, run back to back.
#
# llama.cpp's own tools time it: llama-bench (pp P tokens, tg N tokens) and, with SEQS > 1,
# llama-batched-bench (N steps of SEQS sequences decoding together; loom's tgNxSEQS). Its source
# comes from the npm registry, the only network these machines have: node-llama-cpp ships the
# llama.cpp tree it builds as a git bundle (3.22.1: llama.cpp of 2026-09-28). It is built once,
# natively (-march=native, AMX tiles where the CPU has them), without OpenMP (the threading of
# llama.cpp's prebuilt CPU libraries), with clang: Debian 12's GCC 12.2 compiles ggml's AMX
# tile configuration without its row and column bytes (objdump: only palette_id is stored
# before ldtilecfg), and the first tile instruction then dies with SIGILL. clang 14 spells the
# AMX macros __AMXINT8__ & co., where ggml tests __AMX_INT8__: they are defined for it.
#   LOOM=build/loom REPS=3 SEQS=16 bench/vs_llamacpp.sh /tmp/loom-moe/qwen3moe-2b-q8_0.gguf ...
# ROUNDS=R (R > 0): instead, R rounds per file of one loom run and one llama-bench run (-p P -n N
# -r REPS each), their order swapped every round (ABBA), then per test the median of the rounds'
# loom / llama.cpp ratios: this host's read bandwidth drifts between ~33 and ~60 GB/s from
# minute to minute, so a ratio is only meaningful between runs seconds apart. Generation's ratio
# is also given apart for the rounds whose bandwidth (measured beside loom's run) was at least
# FAST_GBS (default 45) and below it: loom reads at the memory's speed, llama.cpp does not.
#   LLAMACPP_DIR=/tmp/llcpp LOOM=build/loom ROUNDS=8 REPS=2 P=0 bench/vs_llamacpp.sh FILE...
# Needs clang, cmake and ninja (apt-get install clang), npm on the first run; python3 for ROUNDS.
set -euo pipefail
LOOM=${LOOM:-build/loom}
REPS=${REPS:-3}
P=${P:-512}
N=${N:-128}
SEQS=${SEQS:-0}
THREADS=${THREADS:-2}
HERE=$(cd "$(dirname "$0")/llamacpp" && pwd)
WORK=${LLAMACPP_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/loom/llama.cpp}
BIN="$WORK/build/bin"

if [ ! -x "$BIN/llama-bench" ] || [ ! -x "$BIN/llama-batched-bench" ]; then
  if [ ! -d "$HERE/node_modules/node-llama-cpp" ]; then
    # --ignore-scripts: only the source is wanted, not node-llama-cpp's own build. npm 11's
    # `npm ci` refuses this lock file (it lists none of node-llama-cpp's optional per-platform
    # binaries, which are not wanted): then `npm install` of the same versions, lock unchanged.
    (cd "$HERE" && { npm ci --ignore-scripts --omit=optional --no-audit --no-fund >/dev/null 2>&1 ||
      npm install --ignore-scripts --omit=optional --no-audit --no-fund --no-save >/dev/null; })
  fi
  if [ ! -d "$WORK/.git" ]; then
    mkdir -p "$(dirname "$WORK")"
    git -c advice.detachedHead=false clone -q "$HERE/node_modules/node-llama-cpp/llama/gitRelease.bundle" "$WORK"
  fi
  command -v clang++ >/dev/null || { echo "vs_llamacpp.sh: needs clang (apt-get install clang)" >&2; exit 1; }
  amx=""
  macros=$(clang -march=native -dM -E -x c /dev/null)
  for f in TILE INT8 BF16; do
    if grep -q "__AMX${f}__" <<<"$macros" && ! grep -q "__AMX_${f}__" <<<"$macros"; then
      amx+=" -D__AMX_${f}__"
    fi
  done
  echo "building llama.cpp $(git -C "$WORK" log -1 --format='%h of %cs') in $WORK (several minutes)" >&2
  CC=clang CXX=clang++ cmake -S "$WORK" -B "$WORK/build" -G Ninja -DCMAKE_BUILD_TYPE=Release \
    -DGGML_NATIVE=ON -DGGML_OPENMP=OFF -DLLAMA_CURL=OFF -DLLAMA_BUILD_TESTS=OFF \
    -DLLAMA_BUILD_SERVER=OFF -DLLAMA_BUILD_EXAMPLES=OFF "-DCMAKE_C_FLAGS=$amx" \
    "-DCMAKE_CXX_FLAGS=$amx" >/dev/null
  cmake --build "$WORK/build" -j "$(nproc)" --target llama-bench llama-batched-bench >/dev/null
fi

ROUNDS=${ROUNDS:-0}
if [ "$ROUNDS" -gt 0 ]; then
  # Prints "TEST T/S GB/S" lines: loom's median over its repetitions and, for generation, the
  # median memory read bandwidth measured beside them (bench model's samples_mem_bw_gbs; 0 for
  # prefill); llama-bench's mean over its repetitions.
  loom_tps() {
    "$LOOM" bench model -m "$1" -p "$P" -n "$N" -r "$REPS" -t "$THREADS" -o json 2>/dev/null |
      python3 -c 'import json,statistics,sys
for t in json.load(sys.stdin):
    print(t["test"], t["median_ts"], statistics.median(t.get("samples_mem_bw_gbs") or [0]))'
  }
  llama_tps() {
    "$BIN/llama-bench" -m "$1" -p "$P" -n "$N" -r "$REPS" -t "$THREADS" -o json 2>/dev/null |
      python3 -c 'import json,sys; [print(("pp%d" % t["n_prompt"]) if t["n_gen"] == 0 else ("tg%d" % t["n_gen"]), t["avg_ts"]) for t in json.load(sys.stdin)]'
  }
  for f in "$@"; do
    echo "== $f ($(du -h "$f" | cut -f1)), $THREADS threads, $ROUNDS alternating rounds"
    pairs=$(mktemp)
    for r in $(seq "$ROUNDS"); do
      if [ $((r % 2)) = 1 ]; then a=$(loom_tps "$f"); b=$(llama_tps "$f"); else
        b=$(llama_tps "$f"); a=$(loom_tps "$f"); fi
      # Lines "round test loom loom-GB/s llama" for the tests both ran.
      join <(sort <<<"$a") <(sort <<<"$b") | sed "s/^/$r /" | tee -a "$pairs"
    done
    python3 - "$pairs" "${FAST_GBS:-45}" <<'PY'
import statistics, sys
rows = [l.split() for l in open(sys.argv[1])]
fast = float(sys.argv[2])
def summary(label, own):
    ratios = sorted(a / b for a, _, b in own)
    return (f"{label}: loom / llama.cpp median {statistics.median(ratios):.2f}x over {len(own)} "
            f"rounds (min {ratios[0]:.2f}, max {ratios[-1]:.2f}); loom median "
            f"{statistics.median(a for a, _, _ in own):.1f} t/s, llama.cpp "
            f"{statistics.median(b for _, _, b in own):.1f}")
for test in sorted({r[1] for r in rows}):
    own = [(float(r[2]), float(r[3]), float(r[4])) for r in rows if r[1] == test]
    print(summary(test, own))
    if test.startswith("tg"):  # by the minute's memory bandwidth (measured beside loom's runs)
        for label, part in ((f"  at >= {fast:g} GB/s", [o for o in own if o[1] >= fast]),
                            (f"  at < {fast:g} GB/s", [o for o in own if o[1] < fast])):
            if part:
                print(summary(label, part) + f", memory {statistics.median(o[1] for o in part):.1f} GB/s")
PY
    rm -f "$pairs"
  done
  exit 0
fi

batch=()
[ "$SEQS" -gt 1 ] && batch=(-B "$SEQS")
for f in "$@"; do
  echo "== $f ($(du -h "$f" | cut -f1)), $THREADS threads"
  "$LOOM" bench model -m "$f" -p "$P" -n "$N" "${batch[@]}" -r "$REPS" -t "$THREADS" 2>/dev/null
  "$BIN/llama-bench" -m "$f" -p "$P" -n "$N" -r "$REPS" -t "$THREADS" -o md 2>/dev/null
  if [ "$SEQS" -gt 1 ]; then
    # One token of prompt per sequence (the tool needs one), then N steps of SEQS tokens.
    "$BIN/llama-batched-bench" -m "$f" -c $(((N + 8) * SEQS)) -b 2048 -ub 512 -npp 1 \
      -ntg "$N" -npl "$SEQS" -t "$THREADS" 2>/dev/null | grep -E "^\|"
  fi
done
