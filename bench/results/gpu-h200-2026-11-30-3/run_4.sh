#!/bin/bash
# session 18, device call 4: tierpack at 75/60/45% with headroom 0.9 (segment slack now counted) against
# call 3's default run (call3_table.json).
S=$(cd "$(dirname "$0")" && pwd)
export LD_LIBRARY_PATH=$S/lib:$LD_LIBRARY_PATH PYTHONUNBUFFERED=1 PYTHONPATH=$S/python
{
echo "commit $(cat $S/COMMIT)"
echo "command: python3 bench/gpu/gpt2_bench.py --baseline call3_table.json --steps 20 --warmup 3 --tierpack-warmup 5 --modes tierpack --budgets 75,60,45 --gpu-opts chunk:64M,headroom:0.9 --child-timeout 150"
timeout 400 python3 $S/bench/gpu/gpt2_bench.py --baseline $S/call3_table.json --lib $S/lib/libtierpack_cuda.so --steps 20 --warmup 3 --tierpack-warmup 5 --modes tierpack --budgets 75,60,45 --gpu-opts chunk:64M,headroom:0.9 --child-timeout 150 --json $OUT/gpt2_h09.json --logs $OUT/logs
} > $OUT/log4.txt 2>&1
tar czf $OUT/logs4.tgz -C $OUT logs && rm -rf $OUT/logs
grep -v '^{' $OUT/log4.txt | tail -c 6000
