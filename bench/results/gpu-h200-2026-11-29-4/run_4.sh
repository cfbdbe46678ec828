#!/bin/bash
# session 14, device call 4 (nvidia-h200): GPT-2 large at 60/45/35% with the code of this session
# (eager remaps by default; divergence resume; parked-prefetch fix), against the earlier default run.
S=$(cd "$(dirname "$0")" && pwd)
export LD_LIBRARY_PATH=$S/lib:$LD_LIBRARY_PATH PYTHONUNBUFFERED=1
mkdir -p $OUT/logs
{
echo "commit $(cat $S/COMMIT)"
nvidia-smi --query-gpu=index,name,driver_version --format=csv
echo "command: python3 bench/gpu/gpt2_bench.py --baseline call3_baseline.json --steps 20 --warmup 3 --tierpack-warmup 5 --modes tierpack --budgets 60,45,35 --gpu-opts chunk:64M --child-timeout 150 --logs logs"
timeout 420 python3 $S/bench/gpu/gpt2_bench.py --lib $S/lib/libtierpack_cuda.so --baseline $S/call3_baseline.json --steps 20 --warmup 3 --tierpack-warmup 5 --modes tierpack --budgets 60,45,35 --gpu-opts chunk:64M --child-timeout 150 --logs $OUT/logs --json $OUT/gpt2_60_45_35.json
} > $OUT/log4.txt 2>&1
cd $OUT && tar czf logs.tgz logs && rm -rf logs
grep -v '^{' $OUT/log4.txt | tail -c 8000
