#!/bin/bash
# session 20, device call 5: spill segments shared by spilled requests (Note [Spill segments]): the allocator
# suite on the H200, then 256 MiB chunks at 45% and 35% (call 4 ran out of host handles there).
S=$(cd "$(dirname "$0")" && pwd)
R=$(cd "$S/../.." && pwd)
export PYTHONUNBUFFERED=1 PYTHONPATH=$R/python
{
echo "commit $(cat $S/COMMIT)"; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; python3 -c 'import torch;print("torch",torch.__version__)'
echo "== gpu_alloc_tests"; timeout 60 $S/bin/gpu_alloc_tests 2>&1 | grep -E "^\[  (PASSED|FAILED) |FAILED|tests ran|Spill" | tail -12
echo "command: python3 bench/gpu/gpt2_bench.py --baseline call2_gpt2_table.json --steps 20 --warmup 3 --tierpack-warmup 5 --modes tierpack --budgets 45,35 --gpu-opts chunk:256M --child-timeout 110"
timeout 300 python3 $R/bench/gpu/gpt2_bench.py --lib $S/lib2/libtierpack_cuda.so --baseline $S/call2_gpt2_table.json --steps 20 --warmup 3 --tierpack-warmup 5 --modes tierpack --budgets 45,35 --gpu-opts chunk:256M --child-timeout 110 --json $OUT/gpt2_chunk_256M_45_35.json
} > $OUT/log5.txt 2>&1
grep -v '^{' $OUT/log5.txt | grep -v '^tierpack:' | cut -c1-600 | tail -c 6000
