#!/bin/bash
# session 18, device call 5 (nvidia-h200-x2): DDP over NCCL with record_stream forwarded (stop 17) and this
# session's fixes: default vs tierpack at 60% per rank; the gated streams show whether NCCL's were recorded.
S=$(cd "$(dirname "$0")" && pwd)
export LD_LIBRARY_PATH=$S/lib:$LD_LIBRARY_PATH PYTHONUNBUFFERED=1 PYTHONPATH=$S/python
{
echo "commit $(cat $S/COMMIT)"; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; python3 -c 'import torch;print("torch",torch.__version__, "nccl", torch.cuda.nccl.version())'
echo "command: python3 bench/gpu/ddp_bench.py --ranks 2 --budgets 60 --steps 10 --warmup 3 --tierpack-warmup 5 --gpu-opts chunk:64M --child-timeout 170"
timeout 330 python3 $S/bench/gpu/ddp_bench.py --lib $S/lib/libtierpack_cuda.so --ranks 2 --budgets 60 --steps 10 --warmup 3 --tierpack-warmup 5 --gpu-opts chunk:64M --child-timeout 170 --logs $OUT/logs --json $OUT/ddp.json
} > $OUT/log5.txt 2>&1
tar czf $OUT/logs5.tgz -C $OUT logs && rm -rf $OUT/logs
grep -v '^{' $OUT/log5.txt | tail -c 5000
