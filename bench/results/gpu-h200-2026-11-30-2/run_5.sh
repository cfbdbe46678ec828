#!/bin/bash
# session 17, device call 5: CUDA offload tests; hooks_bench (pool, calibration); GPT-2 large
# side by side in one run: tierpack (page groups) and tierpack-act (activation hooks + page groups)
# at 75/60% (default run reused from call6_baseline.json, stop 16).
S=$(cd "$(dirname "$0")" && pwd)
export LD_LIBRARY_PATH=$S/lib:$LD_LIBRARY_PATH PYTHONUNBUFFERED=1
{
echo "commit $(cat $S/COMMIT) + working tree"; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; python3 -c 'import torch;print("torch",torch.__version__)'
timeout 100 python3 $S/tests/integrations/python/activations_cuda_test.py 2>&1 | tail -6
echo "command: python3 bench/gpu/hooks_bench.py --steps 10 --warmup 3 --limits 4,8,12"
timeout 150 python3 $S/bench/gpu/hooks_bench.py --steps 10 --warmup 3 --limits 4,8,12 --json $OUT/hooks.json
echo "command: python3 bench/gpu/gpt2_bench.py --baseline call6_baseline.json --steps 20 --warmup 3 --tierpack-warmup 5 --modes tierpack,tierpack-act --budgets 75,60 --gpu-opts chunk:64M --child-timeout 100"
timeout 330 python3 $S/bench/gpu/gpt2_bench.py --baseline $S/call6_baseline.json --lib $S/lib/libtierpack_cuda.so --steps 20 --warmup 3 --tierpack-warmup 5 --modes tierpack,tierpack-act --budgets 75,60 --gpu-opts chunk:64M --child-timeout 100 --json $OUT/gpt2_side_by_side.json --logs $OUT/logs
} > $OUT/log5.txt 2>&1
grep -v '^{' $OUT/log5.txt | tail -c 9000
