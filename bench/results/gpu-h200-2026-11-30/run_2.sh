#!/bin/bash
# session 16, device call 2 (nvidia-h200): copy window v2 (copies continue while streams drain to a
# closed gate, pause only while gates are held): GPT-2 large at 60% with four windows.
S=$(cd "$(dirname "$0")" && pwd)
export LD_LIBRARY_PATH=$S/lib:$LD_LIBRARY_PATH PYTHONUNBUFFERED=1
mkdir -p $OUT/logs
sec() { echo; echo "== $1 ($(date +%T))"; }
B="python3 $S/bench/gpu/gpt2_bench.py --lib $S/lib/libtierpack_cuda.so"
{
echo "commit $(cat $S/COMMIT)"
sec gpu_migrate_tests
timeout 100 $S/bin/gpu_migrate_tests 2>&1 | grep -E "^\[  (PASSED|FAILED|SKIPPED) |^\[==========\]|FAILED" | tail -8
for o in chunk:64M,copy_piece:8M,copy_window:16M chunk:64M,copy_piece:16M,copy_window:32M chunk:64M,copy_piece:16M,copy_window:64M chunk:64M,copy_window:128M; do
  sec "60% $o"
  echo "command: python3 bench/gpu/gpt2_bench.py --baseline call3_baseline.json --steps 20 --warmup 3 --tierpack-warmup 5 --modes tierpack --budgets 60 --gpu-opts $o --child-timeout 80"
  timeout 85 $B --baseline $S/call3_baseline.json --steps 20 --warmup 3 --tierpack-warmup 5 --modes tierpack --budgets 60 --gpu-opts $o --child-timeout 80 --logs $OUT/logs --json $OUT/gpt2_60_${o//[:,]/_}.json
done
sec done
} > $OUT/log2.txt 2>&1
rm -rf $OUT/logs
grep -v '^{' $OUT/log2.txt | grep -v "^|--\|^| default\|^| mode\|^default peak" | tail -c 8000
