#!/usr/bin/env bash
# Files move between loom and llama.cpp: every Hugging Face reference fixture
# (tests/data/hf_reference: dense, MoE, MLA, hybrids) converted by `loom convert` and run by
# llama.cpp itself (bench/llamacpp/logits.cpp against the tree bench/vs_llamacpp.sh builds,
# F32 KV cache, flash attention off), its logits against the ones transformers computed and
# its greedy continuation against transformers' greedy_16 (not for a prompt holding token 0,
# which transformers' generate masked as padding). TYPE=q8_0 converts to Q8_0 instead (logits
# then differ by the quantization).
#   LLAMACPP_DIR=/tmp/llcpp LOOM=build/loom bench/llamacpp_logits.sh [ARCH...]
set -euo pipefail
LOOM=${LOOM:-build/loom}
TYPE=${TYPE:-f32}
HERE=$(cd "$(dirname "$0")" && pwd)
WORK=${LLAMACPP_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/loom/llama.cpp}
OUT=${OUT:-/tmp/loom-llamacpp-logits}
FIXTURES="$HERE/../tests/data/hf_reference"
mkdir -p "$OUT"
if [ ! -f "$WORK/build/bin/libllama.so" ]; then
  # vs_llamacpp.sh fetches and builds llama.cpp (libllama comes with llama-bench); no files
  # given, it benchmarks nothing.
  LLAMACPP_DIR="$WORK" LOOM="$LOOM" "$HERE/vs_llamacpp.sh"
fi
tool="$OUT/llamacpp_logits"
if [ ! -x "$tool" ] || [ "$HERE/llamacpp/logits.cpp" -nt "$tool" ]; then
  clang++ -O2 -std=c++17 -I"$WORK/include" -I"$WORK/ggml/include" "$HERE/llamacpp/logits.cpp" \
    -L"$WORK/build/bin" -lllama -lggml -lggml-base -Wl,-rpath,"$WORK/build/bin" -o "$tool"
fi
archs=("$@")
[ ${#archs[@]} -gt 0 ] || mapfile -t archs < <(ls "$FIXTURES" | grep -v '\.md$')
printf '| fixture | %s GGUF written by loom | llama.cpp vs transformers, max abs logit diff (3 cases) | llama.cpp vs loom on the file: max abs diff, rows with the best token loom gives | greedy_16 identical (llama.cpp) |\n| --- | --- | ---: | ---: | ---: |\n' "$TYPE"
for a in "${archs[@]}"; do
  gguf="$OUT/$a-$TYPE.gguf"
  if ! "$LOOM" convert "$FIXTURES/$a" "$gguf" --type "$TYPE" >/dev/null 2>"$OUT/$a.convert.log"; then
    printf '| %s | convert failed: %s | | | |\n' "$a" "$(tail -1 "$OUT/$a.convert.log")"
    continue
  fi
  python3 - "$tool" "$gguf" "$FIXTURES/$a" "$a" "$LOOM" "$OUT" <<'PY'
import json, subprocess, sys
tool, gguf, d, arch, loom, out = sys.argv[1:7]
vs_hf, vs_loom, same, n, errors = 0.0, 0.0, 0, 0, []
agree, rows = 0, 0
def llama_cpp(ref, c, greedy):
    r = subprocess.run([tool, gguf, ref, str(c["shape"][1]), str(greedy)] +
                       [str(t) for t in c["tokens"]], capture_output=True, text=True)
    if r.returncode != 0:
        errors.append((r.stderr.strip().splitlines() or ["exit %d" % r.returncode])[-1])
        return None
    return r.stdout.split("\n")
for i, c in enumerate(json.load(open(d + "/cases.json"))["cases"]):
    n += 1
    lines = llama_cpp(d + "/" + c["logits_file"], c, len(c["greedy_16"]))
    if lines is None:
        continue
    vs_hf = max(vs_hf, float(lines[0].split()[1]))
    mine = f"{out}/{arch}-loom-{i}.f32"
    subprocess.run([loom, "eval", "-m", gguf, "--tokens", " ".join(map(str, c["tokens"])),
                    "--logits-out", mine, "-t", "2"], capture_output=True, check=True)
    same_file = llama_cpp(mine, c, 0)
    if same_file is not None:
        f = same_file[0].split()
        vs_loom = max(vs_loom, float(f[1]))
        agree, rows = agree + int(f[5]), rows + int(f[7])
    if 0 in c["tokens"]:  # transformers' generate masked token 0 as padding (README.upstream)
        n -= 1
        continue
    same += [int(t) for t in lines[1].split()[1:]] == c["greedy_16"]
if errors:
    print(f"| {arch} | written | llama.cpp failed: {errors[0]} | | |")
else:
    print(f"| {arch} | written | {vs_hf:.3g} | {vs_loom:.3g}, {agree} of {rows} | {same} of {n} |")
PY
done
