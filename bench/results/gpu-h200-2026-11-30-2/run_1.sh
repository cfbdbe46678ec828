#!/bin/bash
# session 17, device call 1: activation offload tests on CUDA (torch 2.11), then GPT-2 large with
# tierpack-act at 100/75/60/45% against the stop-16 baseline (default run reused from call6_baseline.json).
S=$(cd "$(dirname "$0")" && pwd)
export LD_LIBRARY_PATH=$S/lib:$LD_LIBRARY_PATH PYTHONUNBUFFERED=1 PYTHONPATH=$S/python
{
echo "commit $(cat $S/COMMIT)"; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; python3 -c 'import torch;print("torch",torch.__version__)'
timeout 120 python3 $S/tests/activations_cuda_test.py 2>&1 | tail -15
timeout 60 python3 $S/tests/activations_test.py 2>&1 | tail -4
echo "command: python3 bench/gpu/gpt2_bench.py --baseline call6_baseline.json --steps 20 --warmup 3 --tierpack-warmup 5 --modes tierpack-act --budgets 100,75,60,45 --gpu-opts chunk:64M --child-timeout 110"
timeout 470 python3 $S/bench/gpu/gpt2_bench.py --baseline $S/call6_baseline.json --lib $S/lib/libtierpack_cuda.so --steps 20 --warmup 3 --tierpack-warmup 5 --modes tierpack-act --budgets 100,75,60,45 --gpu-opts chunk:64M --child-timeout 110 --json $OUT/gpt2_act.json --logs $OUT/logs
} > $OUT/log1.txt 2>&1
grep -v '^{' $OUT/log1.txt | tail -c 9000
