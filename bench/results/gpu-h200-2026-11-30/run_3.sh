#!/bin/bash
# session 16, device call 3 (nvidia-h200): do remaps wait for copies done by kernels (SMs) as they
# wait for copy-engine copies, and what bandwidth does a copy kernel reach over PCIe?
S=$(cd "$(dirname "$0")" && pwd)
export LD_LIBRARY_PATH=$S/lib:$LD_LIBRARY_PATH
{
echo "commit $(cat $S/COMMIT)"
echo "command: gpu_alloc_bench --benchmark_filter='BM_SmCopy|BM_RemapBehindCopies/(0|64|1024)/' --benchmark_counters_tabular=true"
timeout 200 $S/bin/gpu_alloc_bench --benchmark_filter='BM_SmCopy|BM_RemapBehindCopies/(0|64|1024)/' --benchmark_counters_tabular=true --benchmark_out=$OUT/bm_sm_copy.json 2>&1 | grep -v "^\*\*\*"
} > $OUT/log3.txt 2>&1
cat $OUT/log3.txt
