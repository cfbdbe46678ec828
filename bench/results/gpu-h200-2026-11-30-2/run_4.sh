#!/bin/bash
# session 17, device call 4: CUDA offload tests with the pinned pool; hooks_bench pool vs no pool.
S=$(cd "$(dirname "$0")" && pwd)
export LD_LIBRARY_PATH=$S/lib:$LD_LIBRARY_PATH PYTHONUNBUFFERED=1
{
echo "commit $(cat $S/COMMIT) + working tree"; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; python3 -c 'import torch;print("torch",torch.__version__)'
timeout 150 python3 $S/tests/integrations/python/activations_cuda_test.py 2>&1 | tail -6
echo "command: python3 bench/gpu/hooks_bench.py --steps 10 --warmup 3 --limits 4,8,12"
timeout 300 python3 $S/bench/gpu/hooks_bench.py --steps 10 --warmup 3 --limits 4,8,12 --json $OUT/hooks.json
} > $OUT/log4.txt 2>&1
grep -v '^{' $OUT/log4.txt | tail -c 6000
