#!/bin/bash
# session 20, device call 3: larger chunks and a fuller plan (headroom) at 75% and 60%, against call 2's default run.
S=$(cd "$(dirname "$0")" && pwd)
R=$(cd "$S/../.." && pwd)
export PYTHONUNBUFFERED=1 PYTHONPATH=$R/python
{
echo "commit $(cat $S/COMMIT)"; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; python3 -c 'import torch;print("torch",torch.__version__)'
for opts in chunk:256M chunk:64M,headroom:0.95 chunk:256M,headroom:0.95; do
  tag=$(echo $opts | tr ':,.' '___')
  echo "command: python3 bench/gpu/gpt2_bench.py --baseline call2_gpt2_table.json --steps 20 --warmup 3 --tierpack-warmup 5 --modes tierpack --budgets 75,60 --gpu-opts $opts --child-timeout 100"
  timeout 190 python3 $R/bench/gpu/gpt2_bench.py --lib $S/lib/libtierpack_cuda.so --baseline $S/call2_gpt2_table.json --steps 20 --warmup 3 --tierpack-warmup 5 --modes tierpack --budgets 75,60 --gpu-opts $opts --child-timeout 100 --json $OUT/gpt2_$tag.json
done
} > $OUT/log3.txt 2>&1
grep -v '^{' $OUT/log3.txt | grep -v "^tierpack:" | grep -v '^| \(default\|ckpt\|save\)' | tail -c 9000
