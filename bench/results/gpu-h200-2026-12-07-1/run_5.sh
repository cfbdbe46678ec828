#!/bin/bash
# Session 33, device call 5 (commit COMMIT5: memcheck_remap_probe gains case 6, the gate closed as
# CudaVmmBackend::close_gate closes it behind 200 queued readers of the chunk): the probe with and without memcheck,
# then GroupMoverTest/cuda.HiddenKernelDuringMovesNeverFaults under memcheck once more, printing its first errors.
# (A T5-style run at 75% with the soft limit's new lowering step was cut: refused starts left too little device time.)
export PYTHONUNBUFFERED=1 TIERPACK_CUDA_LIB=$PWD/.devcarry/lib/libtierpack_cuda.so
D=bench/results/gpu-h200-2026-12-07-1
N=5
{ echo "commit $(cat $D/COMMIT$N)"; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; } > $OUT/env$N.txt
SAN=$(command -v compute-sanitizer || ls /usr/local/cuda/bin/compute-sanitizer)
{ echo "== probe, plain"; timeout 60 .devcarry/bin/memcheck_remap_probe; echo "rc=$?"
  echo "== probe, memcheck: $SAN --tool memcheck --print-limit 3 memcheck_remap_probe"
  timeout 120 $SAN --tool memcheck --print-limit 3 .devcarry/bin/memcheck_remap_probe 2>&1 | head -80; echo "rc=${PIPESTATUS[0]}"
  echo "== TIERPACK_STRESS_ROUNDS=8 $SAN --tool memcheck --print-limit 2 gpu_migrate_tests --gtest_filter='*cuda.HiddenKernel*'"
  TIERPACK_STRESS_ROUNDS=8 timeout 40 $SAN --tool memcheck --print-limit 2 .devcarry/tests/gpu_migrate_tests --gtest_filter='*cuda.HiddenKernel*' 2>&1 | grep -vE "Host Frame" | head -40; echo "rc=${PIPESTATUS[0]}"
} > $OUT/call${N}_probe.txt 2>&1
cat $OUT/call${N}_probe.txt
