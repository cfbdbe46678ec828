#!/bin/bash
# session 16, device call 1 (nvidia-h200): does a remap pay for the copies queued ahead of it
# (BM_RemapBehindCopies), host-mapping cost with huge pages, the mover's CUDA tests with the copy
# window, and GPT-2 large at 60% with and without a copy window.
S=$(cd "$(dirname "$0")" && pwd)
export LD_LIBRARY_PATH=$S/lib:$LD_LIBRARY_PATH PYTHONUNBUFFERED=1
mkdir -p $OUT/logs
sec() { echo; echo "== $1 ($(date +%T))"; }
B="python3 $S/bench/gpu/gpt2_bench.py --lib $S/lib/libtierpack_cuda.so"
{
sec machine; nvidia-smi --query-gpu=index,name,driver_version,memory.total --format=csv
python3 -c "import torch; print('torch', torch.__version__, 'cuda', torch.version.cuda)"
echo "commit $(cat $S/COMMIT)"
cat /sys/kernel/mm/transparent_hugepage/enabled /proc/sys/vm/nr_hugepages
sec BM_RemapBehindCopies
echo "command: gpu_alloc_bench --benchmark_filter='BM_RemapBehindCopies|BM_RemapParts/64/1/0/0/1' --benchmark_counters_tabular=true"
timeout 120 $S/bin/gpu_alloc_bench --benchmark_filter='BM_RemapBehindCopies|BM_RemapParts/64/1/0/0/1' --benchmark_counters_tabular=true --benchmark_out=$OUT/bm_remap_behind.json 2>&1 | grep -v "^\*\*\*"
sec "host remap with THP always / hugetlb 4096 pages"
T=$(cat /sys/kernel/mm/transparent_hugepage/enabled | sed 's/.*\[\(.*\)\].*/\1/')
echo always > /sys/kernel/mm/transparent_hugepage/enabled && timeout 60 $S/bin/gpu_alloc_bench --benchmark_filter='BM_RemapParts/64/1/0/0/1|BM_RemapBehindCopies/0/1' --benchmark_counters_tabular=true 2>&1 | grep "BM_"
echo $T > /sys/kernel/mm/transparent_hugepage/enabled
echo 4096 > /proc/sys/vm/nr_hugepages; cat /proc/sys/vm/nr_hugepages
timeout 60 $S/bin/gpu_alloc_bench --benchmark_filter='BM_RemapParts/64/1/0/0/1|BM_RemapBehindCopies/0/1' --benchmark_counters_tabular=true 2>&1 | grep "BM_"
echo 0 > /proc/sys/vm/nr_hugepages
sec gpu_migrate_tests
timeout 150 $S/bin/gpu_migrate_tests 2>&1 | grep -E "^\[  (PASSED|FAILED|SKIPPED) |^\[==========\]|FAILED|CopyWindow" | tail -12
for o in chunk:64M chunk:64M,copy_window:128M chunk:64M,copy_piece:16M,copy_window:32M chunk:64M,copy_piece:8M,copy_window:16M; do
  sec "60% $o"
  echo "command: python3 bench/gpu/gpt2_bench.py --baseline call3_baseline.json --steps 20 --warmup 3 --tierpack-warmup 5 --modes tierpack --budgets 60 --gpu-opts $o --child-timeout 80"
  timeout 85 $B --baseline $S/call3_baseline.json --steps 20 --warmup 3 --tierpack-warmup 5 --modes tierpack --budgets 60 --gpu-opts $o --child-timeout 80 --logs $OUT/logs --json $OUT/gpt2_60_${o//[:,]/_}.json
done
sec done
} > $OUT/log1.txt 2>&1
rm -rf $OUT/logs
grep -v '^{' $OUT/log1.txt | tail -c 11000
