#!/bin/bash
# Session 25, device call 5: the GPU test suites built on Debian from the merged tree (issue 24's split of the GPU
# allocator, mover and recorder by layer: gpu_alloc_tests, gpu_migrate_tests, gpu_runtime_tests, stripped, in
# .devcarry/tests), the storage mover's CUDA test (70% and under checkpointing), and compute-sanitizer memcheck of
# that test with PyTorch's expandable segments off (calls 1-2: under memcheck cuMemCreate in PyTorch's
# ExpandableSegment::map returned CUDA_ERROR_NOT_PERMITTED).
set -o pipefail
export PYTHONUNBUFFERED=1 TIERPACK_CUDA_LIB=$PWD/.devcarry/lib/libtierpack_cuda.so
{ echo "commit $(cat bench/results/gpu-h200-2026-12-02/COMMIT5)"; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; } > $OUT/env5.txt
SAN=$(command -v compute-sanitizer || ls /usr/local/cuda/bin/compute-sanitizer)
( echo "command: PYTORCH_CUDA_ALLOC_CONF=expandable_segments:False compute-sanitizer --tool memcheck --target-processes all --error-exitcode 9 python3 tests/integrations/python/storage_mover_cuda_test.py -v -k 70_percent"
  PYTORCH_CUDA_ALLOC_CONF=expandable_segments:False timeout 330 $SAN --tool memcheck --print-limit 4 --target-processes all --error-exitcode 9 \
    python3 tests/integrations/python/storage_mover_cuda_test.py -v -k 70_percent 2>&1 | head -c 40000; echo "rc=${PIPESTATUS[0]}" ) > $OUT/call5_sanitizer.txt 2>&1 &
SP=$!
{ for t in gpu_alloc_tests gpu_migrate_tests gpu_runtime_tests; do
    echo "== $t"; timeout 120 .devcarry/tests/$t 2>&1 | grep -E "^\[  (PASSED|FAILED|SKIPPED) |^\[==========\]|FAILED" | tail -12; echo "rc=${PIPESTATUS[0]}"
  done
  echo "== storage_mover_cuda_test.py -k 70_percent -k under_checkpointing"
  timeout 150 python3 tests/integrations/python/storage_mover_cuda_test.py -v -k 70_percent -k under_checkpointing 2>&1 | tail -8
} > $OUT/call5_tests.txt 2>&1
wait $SP
cat $OUT/call5_tests.txt; grep -E "ERROR SUMMARY|rc=|ok$|FAIL|Program hit" $OUT/call5_sanitizer.txt | head
