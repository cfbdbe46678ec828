#!/usr/bin/env bash
# README command 2: installs what is missing, builds tierpack and runs the whole test suite:
#   1. the normal build (Release) and every ctest test (GPU tests skip without a device), then
#      `pip install --no-build-isolation .` from that build into a fresh virtualenv (scripts/test-pip-install.sh);
#   2. an ASan+UBSan (Debug) build of the unit, CLI and reliability suites (TIERPACK_SANITIZE="address;undefined");
#   3. a TSan build of the concurrency suites (TIERPACK_SANITIZE=thread);
#   4. the libFuzzer targets (clang) for a bounded time each (TIERPACK_FUZZ_SECONDS, default 20).
# docs/reliability.md says which guarantee each stage checks. Every build treats warnings as errors
# (TIERPACK_WERROR=ON; off by default for users).
# Usage: scripts/test.sh [--no-sanitize]   (build dirs: build/, build-asan/, build-tsan/, build-fuzz/)
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
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DTIERPACK_WERROR=ON \
      -DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_CUDA_COMPILER_LAUNCHER=ccache >/dev/null
cmake --build build -j "$jobs"
echo "== tests (build/)"
ctest --test-dir build -j "$jobs" --output-on-failure --no-tests=error
echo "== pip install into a fresh virtualenv (from build/)"
scripts/test-pip-install.sh build

if [ "$sanitize" = 1 ]; then
  # Sanitizer stages (issue 9; docs/reliability.md). Each builds only the suites it runs, without
  # CUDA (no GPU in CI: the GPU tier runs on its memfd twin) and without torch (libtorch is not
  # instrumented; the torch tests run in the normal build).
  # run_suite BIN ENV LOG : runs one suite binary with ENV, output in LOG. A suite still running after
  # TIERPACK_SUITE_TIMEOUT seconds (default 600; each takes well under a minute) is a hang: every
  # thread's stack (gdb) goes into LOG, the suite is killed and fails.
  run_suite() {
    local bin=$1 env=$2 log=$3 limit=${TIERPACK_SUITE_TIMEOUT:-600} waited=0 pid
    env $env "$bin" --gtest_brief=1 >"$log" 2>&1 &
    pid=$!
    while kill -0 "$pid" 2>/dev/null; do
      if [ "$waited" -ge "$limit" ]; then
        echo "== still running after $limit s: every thread's stack, then killed" >>"$log"
        gdb -p "$pid" -batch -ex "thread apply all bt" >>"$log" 2>&1 || true
        kill -9 "$pid" 2>/dev/null || true
        wait "$pid" 2>/dev/null || true
        return 1
      fi
      sleep 1
      waited=$((waited + 1))
    done
    wait "$pid"
  }
  # run_suites DIR STAGE ENV SUITE... : runs each suite binary of DIR with ENV, log in DIR/SUITE.log.
  run_suites() {
    local dir=$1 stage=$2 env=$3 failed=0 suite bin
    shift 3
    for suite in "$@"; do
      bin=$(find "$dir/tests" -name "$suite" -type f -executable | head -n 1)
      [ -n "$bin" ] || { echo "missing $stage suite $suite" >&2; return 1; }
      if run_suite "$bin" "$env" "$dir/$suite.log"; then
        echo "$stage: $suite passed"
      else
        echo "$stage: $suite FAILED ($dir/$suite.log):"; tail -150 "$dir/$suite.log"; failed=1
      fi
    done
    return $failed
  }

  # ASan+UBSan (LeakSanitizer included): every suite that runs under it. Not here, and why:
  #   report_large_tests (100k-tensor profiles: minutes under ASan; the normal build runs them),
  #   torch_profile_tests and the torch observer test (libtorch is not instrumented; a preloaded
  #   libtierpack_torch.so would need the ASan runtime preloaded into Python), bench programs.
  asan_suites=(platform_tests core_tests discovery_tests tier_spec_tests placer_tests profiler_tests page_tracer_tests
               run_phases_tests session_tests alloc_host_tests migrate_host_tests host_runtime_tests gpu_alloc_tests
               gpu_migrate_tests gpu_runtime_tests report_tests cli_plan_replay_tests cli_gpu_replay_tests
               reliability_twin_tests reliability_host_tests reliability_session_tests reliability_cli_tests)
  echo "== build with ASan+UBSan (build-asan/: ${asan_suites[*]})"
  cmake -S . -B build-asan -G Ninja -DCMAKE_BUILD_TYPE=Debug -DTIERPACK_SANITIZE="address;undefined" -DTIERPACK_WERROR=ON \
        -DTIERPACK_WITH_TORCH=OFF -DTIERPACK_WITH_CUDA=OFF -DTIERPACK_BUILD_BENCH=OFF \
        -DCMAKE_CXX_COMPILER_LAUNCHER=ccache >/dev/null
  cmake --build build-asan -j "$jobs" --target "${asan_suites[@]}" tierpack_cli
  echo "== tests with ASan+UBSan (build-asan/)"
  # The page tracers catch SIGSEGV themselves (and chain to ASan's handler for faults that are not
  # theirs); allow_user_segv_handler lets them install it.
  run_suites build-asan asan \
    "ASAN_OPTIONS=detect_leaks=1:allow_user_segv_handler=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1" \
    "${asan_suites[@]}"

  # ThreadSanitizer: the concurrency suites (allocator stress, integrity with concurrent writers, the
  # movers, GPU-tier twin with its stream threads, session events from many threads, runtimes
  # torn down with moves in flight). jemalloc is not instrumented, but its locks are pthread
  # mutexes, which TSan sees, so blocks handed between threads through it carry happens-before.
  tsan_suites=(platform_tests alloc_host_tests migrate_host_tests host_runtime_tests gpu_alloc_tests gpu_migrate_tests
               reliability_twin_tests reliability_host_tests reliability_session_tests)
  echo "== build with TSan (build-tsan/: ${tsan_suites[*]})"
  cmake -S . -B build-tsan -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DTIERPACK_SANITIZE=thread -DTIERPACK_WERROR=ON \
        -DTIERPACK_WITH_TORCH=OFF -DTIERPACK_WITH_CUDA=OFF -DTIERPACK_BUILD_BENCH=OFF \
        -DCMAKE_CXX_COMPILER_LAUNCHER=ccache >/dev/null
  cmake --build build-tsan -j "$jobs" --target "${tsan_suites[@]}"
  echo "== tests with TSan (build-tsan/)"
  run_suites build-tsan tsan "TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1" "${tsan_suites[@]}"

  echo "== fuzzers (build-fuzz/, ${TIERPACK_FUZZ_SECONDS:-20} s each)"
  TIERPACK_WERROR=ON TIERPACK_FUZZ_SECONDS=${TIERPACK_FUZZ_SECONDS:-20} scripts/run-fuzzers.sh
fi
echo "== all tests passed"
