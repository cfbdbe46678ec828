#!/bin/bash
# session 15, device call 3 (nvidia-h200): where the 60% step goes (new per-iteration pressure-wait and
# spill counters) and the planner's eviction lag (4 = default, 16, 64); 45% with the default.
S=$(cd "$(dirname "$0")" && pwd)
export LD_LIBRARY_PATH=$S/lib:$LD_LIBRARY_PATH PYTHONUNBUFFERED=1
mkdir -p $OUT/logs
sec() { echo; echo "== $1 ($(date +%T))"; }
B="python3 $S/bench/gpu/gpt2_bench.py --lib $S/lib/libtierpack_cuda.so"
{
echo "commit $(cat $S/COMMIT)"
for o in chunk:64M chunk:64M,evict_lag:16 chunk:64M,evict_lag:64; do
  sec "60% $o"
  echo "command: python3 bench/gpu/gpt2_bench.py --baseline call3_baseline.json --steps 20 --warmup 3 --tierpack-warmup 5 --modes tierpack --budgets 60 --gpu-opts $o --child-timeout 90"
  timeout 100 $B --baseline $S/call3_baseline.json --steps 20 --warmup 3 --tierpack-warmup 5 --modes tierpack --budgets 60 --gpu-opts $o --child-timeout 90 --logs $OUT/logs --json $OUT/gpt2_60_${o//[:,]/_}.json
done
sec "45% chunk:64M"
timeout 130 $B --baseline $S/call3_baseline.json --steps 20 --warmup 3 --tierpack-warmup 5 --modes tierpack --budgets 45 --gpu-opts chunk:64M --child-timeout 120 --logs $OUT/logs --json $OUT/gpt2_45.json
sec done
} > $OUT/log3.txt 2>&1
rm -rf $OUT/logs
grep -v '^{' $OUT/log3.txt | tail -c 9000
