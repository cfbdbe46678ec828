#!/bin/bash
# Session 33, device call 1 (commit COMMIT1 plus this session's bench edits, built on Debian, stripped, carried in
# .devcarry): issue 26's GPU items.
# 1. bench/gpu/storage_copy_bench.py: pinned copies each way and both ways at once (the figure core/presets/
#    h200-pcie.json assumed), plain and through the storage mover's transport.
# 2. compute-sanitizer memcheck of the three GPU test suites (gpu_alloc_tests, gpu_migrate_tests, gpu_runtime_tests),
#    each run plainly first; the stress tests' sizes bounded as in gpu-h200-2026-11-29-2.
# 3. bench/gpu/memcheck_remap_probe.cu with and without memcheck: does memcheck judge a kernel by the mappings of its
#    launch (the reading of HiddenKernelDuringMovesNeverFaults' errors in gpu-h200-2026-11-29-2)?
set -o pipefail
export PYTHONUNBUFFERED=1 TIERPACK_CUDA_LIB=$PWD/.devcarry/lib/libtierpack_cuda.so
D=bench/results/gpu-h200-2026-12-07-1
N=1
{ echo "commit $(cat $D/COMMIT$N)"; nvidia-smi --query-gpu=name,driver_version,pcie.link.gen.current,pcie.link.width.current --format=csv,noheader; python3 -c 'import torch;print("torch",torch.__version__)'; } > $OUT/env$N.txt
cat $OUT/env$N.txt
SAN=$(command -v compute-sanitizer || ls /usr/local/cuda/bin/compute-sanitizer)
{ echo "command: python3 bench/gpu/storage_copy_bench.py --repeats 20 --json call1_copies.json"
  timeout 200 python3 bench/gpu/storage_copy_bench.py --repeats 20 --json $OUT/call1_copies.json 2>&1; echo "rc=$?"; } > $OUT/call1_copies.txt
cat $OUT/call1_copies.txt
{ echo "== probe, plain"; timeout 30 .devcarry/bin/memcheck_remap_probe; echo "rc=$?"
  echo "== probe, memcheck: $SAN --tool memcheck --print-limit 3 memcheck_remap_probe"
  timeout 90 $SAN --tool memcheck --print-limit 3 .devcarry/bin/memcheck_remap_probe 2>&1 | head -60; echo "rc=${PIPESTATUS[0]}"
} > $OUT/call1_probe.txt 2>&1
cat $OUT/call1_probe.txt
export TIERPACK_STRESS_MIGRATIONS=200 TIERPACK_STRESS_ROUNDS=16
for t in gpu_alloc_tests gpu_migrate_tests gpu_runtime_tests; do
  ( echo "== $t, plain"; timeout 150 .devcarry/tests/$t 2>&1 | grep -E "^\[  (PASSED|FAILED|SKIPPED) |^\[==========\]|FAILED" | tail -12; echo "rc=${PIPESTATUS[0]}"
    echo "== $t, $SAN --tool memcheck --error-exitcode 9 --print-limit 3"
    timeout 300 $SAN --tool memcheck --error-exitcode 9 --print-limit 3 .devcarry/tests/$t 2>&1 | grep -vE "^\[ RUN|^\[       OK" | head -c 30000; echo "rc=${PIPESTATUS[0]}"
  ) > $OUT/call1_sanitizer_$t.txt 2>&1 &
done
wait
for t in gpu_alloc_tests gpu_migrate_tests gpu_runtime_tests; do grep -E "^==|PASSED|FAILED|ERROR SUMMARY|rc=|Invalid" $OUT/call1_sanitizer_$t.txt | head -20; done
