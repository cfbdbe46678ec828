#!/bin/bash
# session 19, device call 5: loss over 50 steps with deterministic kernels at every budget of the table.
S=$(cd "$(dirname "$0")" && pwd)
R=$(cd "$S/../.." && pwd)
export PYTHONUNBUFFERED=1 PYTHONPATH=$R/python
{
echo "commit $(cat $S/COMMIT)"; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; python3 -c 'import torch;print("torch",torch.__version__)'
echo "command: python3 bench/gpu/gpt2_bench.py --deterministic --steps 50 --warmup 3 --tierpack-warmup 5 --modes default,tierpack --budgets 100,75,60,45,35 --gpu-opts chunk:64M --child-timeout 150"
timeout 580 python3 $R/bench/gpu/gpt2_bench.py --lib $S/lib/libtierpack_cuda.so --deterministic --steps 50 --warmup 3 --tierpack-warmup 5 --modes default,tierpack --budgets 100,75,60,45,35 --gpu-opts chunk:64M --child-timeout 150 --json $OUT/gpt2_det50.json
} > $OUT/log5.txt 2>&1
grep -v '^{' $OUT/log5.txt | grep -v "^tierpack:" | tail -c 6000
