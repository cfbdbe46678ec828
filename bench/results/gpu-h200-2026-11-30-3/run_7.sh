#!/bin/bash
# session 18, device call 7: tierpack at 75% once more at the final commit (the plan now says how much free
# space persistent segments hold) against call 3's default run.
S=$(cd "$(dirname "$0")" && pwd)
export LD_LIBRARY_PATH=$S/lib:$LD_LIBRARY_PATH PYTHONUNBUFFERED=1 PYTHONPATH=$S/python
{
echo "commit $(cat $S/COMMIT)"
echo "command: python3 bench/gpu/gpt2_bench.py --baseline call3_table.json --steps 20 --warmup 3 --tierpack-warmup 5 --modes tierpack --budgets 75 --gpu-opts chunk:64M --child-timeout 120"
timeout 150 python3 $S/bench/gpu/gpt2_bench.py --baseline $S/call3_table.json --lib $S/lib/libtierpack_cuda.so --steps 20 --warmup 3 --tierpack-warmup 5 --modes tierpack --budgets 75 --gpu-opts chunk:64M --child-timeout 120 --json $OUT/gpt2_75.json --logs $OUT/logs
} > $OUT/log7.txt 2>&1
cat $OUT/logs/*.txt | grep "tierpack:" > $OUT/tierpack_lines7.txt; rm -rf $OUT/logs
grep -v '^{' $OUT/log7.txt | tail -c 3000; cat $OUT/tierpack_lines7.txt | cut -c1-250
