#!/bin/bash
# session 16, device call 6 (nvidia-h200): the issue's table from one run with this session's code:
# default, checkpointing, save_on_cpu, tierpack at 100/75/60/45% (35% left out: > 100 s per run).
S=$(cd "$(dirname "$0")" && pwd)
export LD_LIBRARY_PATH=$S/lib:$LD_LIBRARY_PATH PYTHONUNBUFFERED=1
{
echo "commit $(cat $S/COMMIT)"
echo "command: python3 bench/gpu/gpt2_bench.py --steps 20 --warmup 3 --tierpack-warmup 5 --modes default,ckpt,save_on_cpu,tierpack --budgets 100,75,60,45 --gpu-opts chunk:64M --child-timeout 110"
timeout 560 python3 $S/bench/gpu/gpt2_bench.py --lib $S/lib/libtierpack_cuda.so --steps 20 --warmup 3 --tierpack-warmup 5 --modes default,ckpt,save_on_cpu,tierpack --budgets 100,75,60,45 --gpu-opts chunk:64M --child-timeout 110 --json $OUT/gpt2_table.json
} > $OUT/log6.txt 2>&1
grep -v '^{' $OUT/log6.txt | tail -c 7000
