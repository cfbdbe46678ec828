#!/bin/bash
# session 14, device call 1 (nvidia-h200-x2): the remap's driver phases (BM_RemapParts), then the
# two-GPU DDP GPT-2 large benchmark of issue 10 (default vs tierpack at 60% / 45% per rank).
S=$(cd "$(dirname "$0")" && pwd)
export LD_LIBRARY_PATH=$S/lib:$LD_LIBRARY_PATH PYTHONUNBUFFERED=1
{
echo "== machine"; nvidia-smi --query-gpu=index,name,driver_version,memory.total --format=csv; nvidia-smi topo -m
python3 -c "import torch; print('torch', torch.__version__, 'cuda', torch.version.cuda, 'nccl', torch.cuda.nccl.version())"
echo "commit $(cat $S/COMMIT)"
echo "== remap parts"
echo "command: gpu_alloc_bench --benchmark_filter=RemapParts"
CUDA_VISIBLE_DEVICES=0 timeout 100 $S/bin/gpu_alloc_bench --benchmark_filter=RemapParts --benchmark_out=$OUT/remap_parts.json 2>&1 | grep -v "^\*\*\*"
echo "== ddp"
echo "command: python3 bench/gpu/ddp_bench.py --ranks 2 --budgets 60,45 --steps 20 --warmup 3 --tierpack-warmup 5 --gpu-opts chunk:64M --child-timeout 150"
timeout 470 python3 $S/bench/gpu/ddp_bench.py --lib $S/lib/libtierpack_cuda.so --ranks 2 --budgets 60,45 --steps 20 --warmup 3 --tierpack-warmup 5 --gpu-opts chunk:64M --child-timeout 150 --json $OUT/ddp.json
} > $OUT/log1.txt 2>&1
grep -v '^{' $OUT/log1.txt | tail -c 9000
