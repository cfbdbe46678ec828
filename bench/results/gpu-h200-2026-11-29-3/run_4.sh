#!/bin/bash
# session 13, device call 4: chunk size vs remap cost in GPT-2 large at 60% and 75% (same binaries as call 3).
S=$(cd "$(dirname "$0")" && pwd)
export LD_LIBRARY_PATH=$S/lib:$LD_LIBRARY_PATH PYTHONUNBUFFERED=1
sec() { echo; echo "=== $* ($(date +%T))"; }
{
sec env; cat $S/COMMIT
for c in 128M 256M; do
sec "chunk $c"
echo "command: python3 bench/gpu/gpt2_bench.py --baseline call3_baseline.json --steps 20 --warmup 3 --tierpack-warmup 5 --modes tierpack --budgets 75,60 --gpu-opts chunk:$c --child-timeout 110"
timeout 240 python3 $S/bench/gpu/gpt2_bench.py --lib $S/lib/libtierpack_cuda.so --baseline $S/call3_baseline.json --steps 20 --warmup 3 --tierpack-warmup 5 --modes tierpack --budgets 75,60 --gpu-opts chunk:$c --child-timeout 110 --logs $OUT/logs_$c --json $OUT/gpt2_chunk_$c.json
done
for f in $OUT/logs_*/*; do echo "##### $f"; cat $f; done > $OUT/children_stderr.txt; rm -rf $OUT/logs_*
sec done
} > $OUT/log4.txt 2>&1
grep -v '^{' $OUT/log4.txt | tail -c 8000
