#!/bin/bash
# session 19, device call 4: copies issued in pieces (copy_piece) with eager remaps, GPT-2 large at 75% and 60%,
# against session 18's call-3 default run (--baseline).
S=$(cd "$(dirname "$0")" && pwd)
R=$(cd "$S/../.." && pwd)
export PYTHONUNBUFFERED=1 PYTHONPATH=$R/python
{
echo "commit $(cat $S/COMMIT)"; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; python3 -c 'import torch;print("torch",torch.__version__)'
for opts in chunk:64M chunk:64M,copy_piece:8M chunk:64M,copy_piece:16M chunk:64M,copy_piece:4M; do
  n=$(echo $opts | tr ':,' '__')
  echo "command: python3 bench/gpu/gpt2_bench.py --baseline bench/results/gpu-h200-2026-11-30-3/call3_gpt2_table.json --steps 20 --warmup 3 --tierpack-warmup 5 --modes tierpack --budgets 75,60 --gpu-opts $opts --child-timeout 120"
  timeout 280 python3 $R/bench/gpu/gpt2_bench.py --baseline $R/bench/results/gpu-h200-2026-11-30-3/call3_gpt2_table.json --lib $S/lib/libtierpack_cuda.so --steps 20 --warmup 3 --tierpack-warmup 5 --modes tierpack --budgets 75,60 --gpu-opts $opts --child-timeout 120 --json $OUT/gpt2_$n.json
done
} > $OUT/log1.txt 2>&1
grep -v '^{' $OUT/log1.txt | grep -v "^tierpack:" | tail -c 9000
