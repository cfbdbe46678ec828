#!/bin/bash
# session 17, device call 3: activation offload CUDA tests, hooks_bench (hooks on PyTorch's allocator),
# GPT-2 large with tierpack-act at 100/75/60/45% (default run reused from call6_baseline.json).
S=$(cd "$(dirname "$0")" && pwd)
export LD_LIBRARY_PATH=$S/lib:$LD_LIBRARY_PATH PYTHONUNBUFFERED=1
{
echo "commit $(cat $S/COMMIT) + working tree"; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; python3 -c 'import torch;print("torch",torch.__version__)'
timeout 150 python3 $S/tests/integrations/python/activations_cuda_test.py 2>&1 | tail -12
timeout 60 python3 $S/tests/integrations/python/activations_test.py 2>&1 | tail -3
echo "command: python3 bench/gpu/hooks_bench.py --steps 10 --warmup 3 --limits 4,8,12"
timeout 200 python3 $S/bench/gpu/hooks_bench.py --steps 10 --warmup 3 --limits 4,8,12 --json $OUT/hooks.json
echo "command: python3 bench/gpu/gpt2_bench.py --baseline call6_baseline.json --steps 20 --warmup 3 --tierpack-warmup 5 --modes tierpack-act --budgets 75,60 --gpu-opts chunk:64M --child-timeout 100"
timeout 300 python3 $S/bench/gpu/gpt2_bench.py --baseline $S/call6_baseline.json --lib $S/lib/libtierpack_cuda.so --steps 20 --warmup 3 --tierpack-warmup 5 --modes tierpack-act --budgets 75,60 --gpu-opts chunk:64M --child-timeout 100 --json $OUT/gpt2_act.json --logs $OUT/logs
} > $OUT/log3.txt 2>&1
grep -v '^{' $OUT/log3.txt | tail -c 10000
