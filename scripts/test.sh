#!/usr/bin/env bash
# README command 2: installs what is missing, builds tierpack and runs the whole test suite:
#   1. the normal build (RelWithDebInfo) and every ctest test (GPU tests skip without a device);
#   2. an ASan+UBSan build of the unit tests (TIERPACK_SANITIZE="address;undefined");
#   3. the libFuzzer targets (clang) for a bounded time each (TIERPACK_FUZZ_SECONDS, default 20).
# Usage: scripts/test.sh [--no-sanitize]   (build dirs: build/, build-asan/, build-fuzz/)
set -euo pipefail
cd "$(dirname "$0")/.."
sanitize=1
for arg in "$@"; do
  case "$arg" in
    --no-sanitize) sanitize=0 ;;
    *) echo "test.sh: unknown option '$arg' (use --no-sanitize)" >&2; exit 2 ;;
  esac
done

scripts/install-deps.sh --guest --browser
jobs=$(nproc)
export CCACHE_DIR=${CCACHE_DIR:-$PWD/.cache/ccache}

echo "== build (build/)"
cmake -S . -B build -G Ninja -DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_CUDA_COMPILER_LAUNCHER=ccache >/dev/null
cmake --build build -j "$jobs"
echo "== tests (build/)"
ctest --test-dir build -j "$jobs" --output-on-failure --no-tests=error

if [ "$sanitize" = 1 ]; then
  # The suites below run under ASan+UBSan (LeakSanitizer included). The others (placer, tier spec,
  # profiler, page tracers, GPU twin, report, session, torch) run only in the normal build so far:
  # adding them here is open work (issue 9).
  asan_suites=(core_tests discovery_tests alloc_host_tests migrate_host_tests)
  echo "== build with ASan+UBSan (build-asan/: ${asan_suites[*]})"
  cmake -S . -B build-asan -G Ninja -DCMAKE_BUILD_TYPE=Debug -DTIERPACK_SANITIZE="address;undefined" \
        -DTIERPACK_WITH_TORCH=OFF -DTIERPACK_BUILD_BENCH=OFF -DCMAKE_CXX_COMPILER_LAUNCHER=ccache >/dev/null
  cmake --build build-asan -j "$jobs" --target "${asan_suites[@]}"
  echo "== tests with ASan+UBSan (build-asan/)"
  asan_failed=0
  for suite in "${asan_suites[@]}"; do
    bin=$(find build-asan/tests -name "$suite" -type f -executable | head -n 1)
    [ -n "$bin" ] || { echo "missing ASan suite $suite" >&2; exit 1; }
    if ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 "$bin" --gtest_brief=1 >"build-asan/$suite.log" 2>&1; then
      echo "asan: $suite passed"
    else
      echo "asan: $suite FAILED (build-asan/$suite.log):"; tail -40 "build-asan/$suite.log"; asan_failed=1
    fi
  done
  [ "$asan_failed" = 0 ] || exit 1
  echo "== fuzzers (build-fuzz/, ${TIERPACK_FUZZ_SECONDS:-20} s each)"
  TIERPACK_FUZZ_SECONDS=${TIERPACK_FUZZ_SECONDS:-20} scripts/run-fuzzers.sh
fi
echo "== all tests passed"
