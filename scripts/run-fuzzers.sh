#!/usr/bin/env bash
# Builds tierpack's libFuzzer targets (tests/fuzz) with clang in build-fuzz/ and runs each for a
# bounded time, failing on the first crash, sanitizer report or non-tierpack exception.
#   scripts/run-fuzzers.sh [-t SECONDS] [TARGET...]     (default: 30 s each, all targets)
# New inputs the fuzzer finds go to build-fuzz/corpus/<target>/ (the checked-in seeds in
# tests/fuzz/corpus/ stay as they are); a crashing input is saved as build-fuzz/<target>-crash-*.
# TIERPACK_WERROR=ON (scripts/test.sh sets it) makes compiler warnings errors.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${TIERPACK_FUZZ_SECONDS:-30}
targets=()
while [ $# -gt 0 ]; do
  case "$1" in
    -t) seconds=${2:?"-t needs a number of seconds"}; shift 2 ;;
    -h|--help) sed -n '2,6p' "$0"; exit 0 ;;
    -*) echo "run-fuzzers.sh: unknown option '$1' (use -t SECONDS)" >&2; exit 2 ;;
    *) targets+=("$1"); shift ;;
  esac
done
case "$seconds" in ''|*[!0-9]*) echo "run-fuzzers.sh: -t needs a whole number of seconds" >&2; exit 2 ;; esac

command -v clang++ >/dev/null || { echo "run-fuzzers.sh: clang++ not found (apt-get install clang)" >&2; exit 1; }
launcher=()
command -v ccache >/dev/null && launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
CC=clang CXX=clang++ cmake -S . -B build-fuzz -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DTIERPACK_BUILD_FUZZERS=ON \
  -DTIERPACK_WITH_TORCH=OFF -DTIERPACK_BUILD_BENCH=OFF -DTIERPACK_WITH_CUDA=OFF \
  -DTIERPACK_WERROR="${TIERPACK_WERROR:-OFF}" "${launcher[@]}" >/dev/null
cmake --build build-fuzz --target fuzzers -j "$(nproc)"

if [ ${#targets[@]} -eq 0 ]; then
  for d in tests/fuzz/corpus/*/; do
    t=fuzz_$(basename "$d")
    [ -x "build-fuzz/tests/fuzz/$t" ] && targets+=("$t")
  done
fi
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1} UBSAN_OPTIONS=${UBSAN_OPTIONS:-halt_on_error=1:print_stacktrace=1}
status=0
for t in "${targets[@]}"; do
  name=${t#fuzz_}
  bin=build-fuzz/tests/fuzz/$t
  [ -x "$bin" ] || { echo "run-fuzzers.sh: no fuzz target '$t' (built: $(ls build-fuzz/tests/fuzz | grep '^fuzz_' | tr '\n' ' '))" >&2; exit 2; }
  mkdir -p "build-fuzz/corpus/$name"
  dict=()
  [ -f "tests/fuzz/$name.dict" ] && dict=(-dict="tests/fuzz/$name.dict")
  echo "== $t: ${seconds}s"
  if "$bin" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 "${dict[@]}" \
       -artifact_prefix="build-fuzz/$t-" "build-fuzz/corpus/$name" "tests/fuzz/corpus/$name" 2>"build-fuzz/$t.log"; then
    grep -E '^(stat::number_of_executed_units|stat::new_units_added)|^Done' "build-fuzz/$t.log" || true
  else
    status=1
    echo "!! $t failed; log: build-fuzz/$t.log" >&2
    grep -E 'ERROR|bug|SUMMARY|Test unit written' "build-fuzz/$t.log" | head -20 >&2 || true
  fi
done
exit $status
