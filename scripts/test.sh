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
  echo "== build with ASan+UBSan (build-asan/, unit tests only)"
  cmake -S . -B build-asan -G Ninja -DCMAKE_BUILD_TYPE=Debug -DTIERPACK_SANITIZE="address;undefined" \
        -DTIERPACK_WITH_TORCH=OFF -DTIERPACK_BUILD_BENCH=OFF -DCMAKE_CXX_COMPILER_LAUNCHER=ccache >/dev/null
  cmake --build build-asan -j "$jobs"
  echo "== tests with ASan+UBSan (build-asan/)"
  ASAN_OPTIONS=detect_leaks=1:abort_on_error=0 UBSAN_OPTIONS=print_stacktrace=1 \
    ctest --test-dir build-asan -j "$jobs" --output-on-failure -L unit --no-tests=error
  echo "== fuzzers (build-fuzz/, ${TIERPACK_FUZZ_SECONDS:-20} s each)"
  TIERPACK_FUZZ_SECONDS=${TIERPACK_FUZZ_SECONDS:-20} scripts/run-fuzzers.sh
fi
echo "== all tests passed"
