#!/bin/bash
# session 20, device call 7: a fuller plan (headroom 0.95) at 45% and 35% with 64 MiB chunks, against call 2's default run.
S=$(cd "$(dirname "$0")" && pwd)
R=$(cd "$S/../.." && pwd)
export PYTHONUNBUFFERED=1 PYTHONPATH=$R/python
{
echo "commit $(cat $S/COMMIT)"; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
echo "command: python3 bench/gpu/gpt2_bench.py --baseline call2_gpt2_table.json --steps 20 --warmup 3 --tierpack-warmup 5 --modes tierpack --budgets 45,35 --gpu-opts chunk:64M,headroom:0.95 --child-timeout 100"
timeout 200 python3 $R/bench/gpu/gpt2_bench.py --lib $S/lib2/libtierpack_cuda.so --baseline $S/call2_gpt2_table.json --steps 20 --warmup 3 --tierpack-warmup 5 --modes tierpack --budgets 45,35 --gpu-opts chunk:64M,headroom:0.95 --child-timeout 100 --json $OUT/gpt2_chunk_64M_headroom_0_95_45_35.json
} > $OUT/log7.txt 2>&1
grep '^| tierpack\|^command' $OUT/log7.txt | cut -c1-520
