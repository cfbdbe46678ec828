#!/bin/bash
# session 20, device call 2: the whole table from one run, with the transfer bound over the live-bytes curve at every block boundary.
S=$(cd "$(dirname "$0")" && pwd)
R=$(cd "$S/../.." && pwd)
export PYTHONUNBUFFERED=1 PYTHONPATH=$R/python
{
echo "commit $(cat $S/COMMIT)"; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; python3 -c 'import torch;print("torch",torch.__version__)'
echo "command: python3 bench/gpu/gpt2_bench.py --steps 20 --warmup 3 --tierpack-warmup 5 --modes default,ckpt,save_on_cpu,tierpack --budgets 100,75,60,45,35 --gpu-opts chunk:64M --child-timeout 150"
timeout 570 python3 $R/bench/gpu/gpt2_bench.py --lib $S/lib/libtierpack_cuda.so --steps 20 --warmup 3 --tierpack-warmup 5 --modes default,ckpt,save_on_cpu,tierpack --budgets 100,75,60,45,35 --gpu-opts chunk:64M --child-timeout 150 --json $OUT/gpt2_table.json --logs $OUT/logs
} > $OUT/log2.txt 2>&1
grep -v '^{' $OUT/log2.txt | grep -v "^tierpack:" | tail -c 8000
