#!/bin/bash
# session 20, device call 4: 256 MiB chunks at 45% and 35%; 128 MiB chunks with headroom 0.95 at 75% and 60%.
S=$(cd "$(dirname "$0")" && pwd)
R=$(cd "$S/../.." && pwd)
export PYTHONUNBUFFERED=1 PYTHONPATH=$R/python
{
echo "commit $(cat $S/COMMIT)"; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; python3 -c 'import torch;print("torch",torch.__version__)'
for run in "chunk:256M 45,35" "chunk:128M,headroom:0.95 75,60"; do
  set -- $run; opts=$1; budgets=$2
  tag=$(echo $opts | tr ':,.' '___')_$(echo $budgets | tr ',' '_')
  echo "command: python3 bench/gpu/gpt2_bench.py --baseline call2_gpt2_table.json --steps 20 --warmup 3 --tierpack-warmup 5 --modes tierpack --budgets $budgets --gpu-opts $opts --child-timeout 110"
  timeout 240 python3 $R/bench/gpu/gpt2_bench.py --lib $S/lib/libtierpack_cuda.so --baseline $S/call2_gpt2_table.json --steps 20 --warmup 3 --tierpack-warmup 5 --modes tierpack --budgets $budgets --gpu-opts $opts --child-timeout 110 --json $OUT/gpt2_$tag.json
done
} > $OUT/log4.txt 2>&1
grep -v '^{' $OUT/log4.txt | grep '^| tierpack\|^command' | cut -c1-420
