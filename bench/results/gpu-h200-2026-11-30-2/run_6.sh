#!/bin/bash
# session 17, device call 6: tierpack-act (activation hooks; page groups do not move) at 75/60%
# (default run reused from call6_baseline.json, stop 16).
S=$(cd "$(dirname "$0")" && pwd)
export LD_LIBRARY_PATH=$S/lib:$LD_LIBRARY_PATH PYTHONUNBUFFERED=1
{
echo "commit $(cat $S/COMMIT) + working tree"
echo "command: python3 bench/gpu/gpt2_bench.py --baseline call6_baseline.json --steps 20 --warmup 3 --tierpack-warmup 5 --modes tierpack-act --budgets 75,60 --gpu-opts chunk:64M --child-timeout 100"
timeout 270 python3 $S/bench/gpu/gpt2_bench.py --baseline $S/call6_baseline.json --lib $S/lib/libtierpack_cuda.so --steps 20 --warmup 3 --tierpack-warmup 5 --modes tierpack-act --budgets 75,60 --gpu-opts chunk:64M --child-timeout 100 --json $OUT/gpt2_act.json --logs $OUT/logs
} > $OUT/log6.txt 2>&1
grep -v '^{' $OUT/log6.txt | tail -c 5000
