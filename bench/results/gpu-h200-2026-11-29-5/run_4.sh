#!/bin/bash
# session 15, device call 4 (nvidia-h200): GPT-2 large at 100% and 75% with this session's code (for the
# simulator validation), and 45% twice more (its spread between runs).
S=$(cd "$(dirname "$0")" && pwd)
export LD_LIBRARY_PATH=$S/lib:$LD_LIBRARY_PATH PYTHONUNBUFFERED=1
mkdir -p $OUT/logs
sec() { echo; echo "== $1 ($(date +%T))"; }
B="python3 $S/bench/gpu/gpt2_bench.py --lib $S/lib/libtierpack_cuda.so"
{
echo "commit $(cat $S/COMMIT)"
sec "100,75"
echo "command: python3 bench/gpu/gpt2_bench.py --baseline call3_baseline.json --steps 20 --warmup 3 --tierpack-warmup 5 --modes tierpack --budgets 100,75 --gpu-opts chunk:64M --child-timeout 100"
timeout 220 $B --baseline $S/call3_baseline.json --steps 20 --warmup 3 --tierpack-warmup 5 --modes tierpack --budgets 100,75 --gpu-opts chunk:64M --child-timeout 100 --logs $OUT/logs --json $OUT/gpt2_100_75.json
for k in a b; do
  sec "45% run $k"
  timeout 130 $B --baseline $S/call3_baseline.json --steps 20 --warmup 3 --tierpack-warmup 5 --modes tierpack --budgets 45 --gpu-opts chunk:64M --child-timeout 120 --logs $OUT/logs --json $OUT/gpt2_45_$k.json
done
sec done
} > $OUT/log4.txt 2>&1
rm -rf $OUT/logs
grep -v '^{' $OUT/log4.txt | tail -c 9000
