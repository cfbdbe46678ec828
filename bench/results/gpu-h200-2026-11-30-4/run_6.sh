#!/bin/bash
# session 19, device call 6 (nvidia-h200-x2): DDP over NCCL, default vs tierpack at 60% per rank, with NCCL's
# streams (PyTorch's stream pool) gated: the gated streams per rank, gate timeouts and the step time.
S=$(cd "$(dirname "$0")" && pwd)
R=$(cd "$S/../.." && pwd)
export PYTHONUNBUFFERED=1 PYTHONPATH=$R/python
{
echo "commit $(cat $S/COMMIT)"; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; python3 -c 'import torch;print("torch",torch.__version__, "nccl", torch.cuda.nccl.version())'
echo "command: python3 bench/gpu/ddp_bench.py --ranks 2 --budgets 60 --steps 10 --warmup 3 --tierpack-warmup 5 --gpu-opts chunk:64M --child-timeout 170"
timeout 330 python3 $R/bench/gpu/ddp_bench.py --lib $S/lib/libtierpack_cuda.so --ranks 2 --budgets 60 --steps 10 --warmup 3 --tierpack-warmup 5 --gpu-opts chunk:64M --child-timeout 170 --logs $OUT/logs --json $OUT/ddp.json
} > $OUT/log6.txt 2>&1
grep -h "held at remap gates\|gate" $OUT/logs/*.stderr.txt | sort | uniq -c | head > $OUT/gate_lines6.txt
tar czf $OUT/logs6.tgz -C $OUT logs && rm -rf $OUT/logs
grep -v '^{' $OUT/log6.txt | tail -c 4000; cat $OUT/gate_lines6.txt
