#!/bin/bash
# Session 35, device call 4 (commit COMMIT4): the VMM mechanism's CUDA tests after its planner moved to
# placer/vmm_plan (gpu_runtime_tests, gpu_migrate_tests; the code moved, unchanged).
D=bench/results/gpu-h200-2026-12-09-1
N=4
{ echo "commit $(cat $D/COMMIT$N)"; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
  for t in gpu_runtime_tests gpu_migrate_tests; do echo "== $t"; timeout 100 .devcarry/tests/$t 2>&1 | grep -E "^\[  (PASSED|FAILED|SKIPPED)|^\[==========\]|FAILED" | tail -8; echo "rc=${PIPESTATUS[0]}"; done
} > $OUT/call${N}_vmm_tests.txt 2>&1
cat $OUT/call${N}_vmm_tests.txt
