#!/bin/bash
# session 20, device call 6: the allocator suite after the spill tests' sizes were fixed for CUDA (a CUDA chunk is one page).
S=$(cd "$(dirname "$0")" && pwd)
{
echo "commit $(cat $S/COMMIT)"; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
echo "== gpu_alloc_tests"; timeout 60 $S/bin/gpu_alloc_tests 2>&1 | grep -E "^\[  (PASSED|FAILED) |FAILED|tests ran|Spill" | tail -14
} > $OUT/log6.txt 2>&1
cat $OUT/log6.txt
