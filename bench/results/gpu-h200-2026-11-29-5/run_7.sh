#!/bin/bash
# session 15, device call 7 (nvidia-h200): persistent groups kept on the host where moves cannot meet
# the budget (Note [Groups that live on the host]): GPT-2 large at 45% and 35%.
S=$(cd "$(dirname "$0")" && pwd)
export LD_LIBRARY_PATH=$S/lib:$LD_LIBRARY_PATH PYTHONUNBUFFERED=1
B="python3 $S/bench/gpu/gpt2_bench.py --lib $S/lib/libtierpack_cuda.so"
{
echo "commit $(cat $S/COMMIT)"
echo "command: python3 bench/gpu/gpt2_bench.py --baseline call3_baseline.json --steps 10 --warmup 3 --tierpack-warmup 5 --modes tierpack --budgets 45 --gpu-opts chunk:64M --child-timeout 105"
timeout 110 $B --baseline $S/call3_baseline.json --steps 10 --warmup 3 --tierpack-warmup 5 --modes tierpack --budgets 45 --gpu-opts chunk:64M --child-timeout 105 --json $OUT/gpt2_45_resident.json
echo "command: python3 bench/gpu/gpt2_bench.py --baseline call3_baseline.json --steps 4 --warmup 1 --tierpack-warmup 4 --modes tierpack --budgets 35 --gpu-opts chunk:64M --child-timeout 100"
timeout 105 $B --baseline $S/call3_baseline.json --steps 4 --warmup 1 --tierpack-warmup 4 --modes tierpack --budgets 35 --gpu-opts chunk:64M --child-timeout 100 --json $OUT/gpt2_35_resident.json
} > $OUT/log7.txt 2>&1
grep -v '^{' $OUT/log7.txt | tail -c 7000
