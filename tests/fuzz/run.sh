#!/usr/bin/env bash
# Runs every fuzz target (or those named) for SECONDS each with libFuzzer, ASan and UBSan, and
# prints per target the inputs executed and any crash, timeout or out-of-memory it found.
#   tests/fuzz/run.sh SECONDS [TARGET...]        e.g. tests/fuzz/run.sh 60 jinja structured
# Builds build-fuzz/ first when needed (clang: `LOOM_FUZZ=1 scripts/install-deps.sh`). Inputs the
# fuzzer finds go to build-fuzz/fuzz-corpus/<target>/ (the seeds in tests/fuzz/corpus/ are only
# read); a crashing input is written to build-fuzz/fuzz-artifacts/<target>/ and its path
# printed: after fixing the bug, copy it into tests/fuzz/corpus/<target>/ as a regression seed.
# Env: LOOM_FUZZ_BUILD (build dir), FUZZ_FLAGS (extra libFuzzer flags, e.g. "-jobs=2").
set -uo pipefail
secs=${1:?usage: tests/fuzz/run.sh SECONDS [TARGET...]}
shift
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
build="${LOOM_FUZZ_BUILD:-$root/build-fuzz}"
if (($#)); then
  targets=("$@")
else
  targets=()
  for d in "$root"/tests/fuzz/corpus/*/; do targets+=("$(basename "$d")"); done
fi

if [ ! -f "$build/build.ninja" ]; then
  command -v clang++ >/dev/null || { echo "clang++ not found: LOOM_FUZZ=1 scripts/install-deps.sh" >&2; exit 2; }
  launcher=()
  command -v ccache >/dev/null && launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_C_COMPILER_LAUNCHER=ccache)
  CC=clang CXX=clang++ cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Debug \
    -DLOOM_FUZZ=ON -DLOOM_BUILD_TESTS=OFF "${launcher[@]}" >/dev/null || exit 2
fi
cmake --build "$build" -j"${FUZZ_BUILD_JOBS:-$(nproc)}" --target "${targets[@]/#/fuzz_}" || exit 2

status=0
printf '%-16s %12s %10s %8s  %s\n' target execs exec/s corpus result
for t in "${targets[@]}"; do
  work="$build/fuzz-corpus/$t"
  art="$build/fuzz-artifacts/$t/"
  mkdir -p "$work" "$art"
  log="$build/fuzz-$t.log"
  # -rss_limit_mb / -malloc_limit_mb: an input that makes the code allocate without bound is a
  # finding ("out-of-memory"), as is one that runs longer than -timeout seconds.
  ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1:allocator_may_return_null=1}" \
    "$build/fuzz_$t" -max_total_time="$secs" -timeout=30 -rss_limit_mb=2560 \
    -malloc_limit_mb=1024 -max_len=65536 -print_final_stats=1 -artifact_prefix="$art" \
    ${FUZZ_FLAGS:-} "$work" "$root/tests/fuzz/corpus/$t" >"$log" 2>&1
  rc=$?
  execs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' | tail -1)
  rate=$(grep -o 'stat::average_exec_per_sec: *[0-9]*' "$log" | grep -o '[0-9]*$' | tail -1)
  size=$(find "$work" -type f | wc -l)
  if ((rc == 0)); then
    result=ok
  else
    status=1
    kind=$(grep -m1 -oE 'ERROR: (AddressSanitizer|LeakSanitizer|libFuzzer|UndefinedBehaviorSanitizer)[^(]*|runtime error:.*|fuzz check failed:.*' "$log")
    result="FAILED ($kind) $(grep -m1 -o "Test unit written to .*" "$log") log: $log"
  fi
  printf '%-16s %12s %10s %8s  %s\n' "$t" "${execs:-?}" "${rate:-?}" "$size" "$result"
done
exit $status
