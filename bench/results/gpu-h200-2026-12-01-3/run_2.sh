#!/bin/bash
# Session 24, device call 2: after recipes through views and autocast's held casts. (1) What unmapping and
# mapping expandable segments' pages costs; (2) GPT-2 large and the Llama-style decoder with recompute at 75% of
# the default peak and at checkpointing's peak, the allocator soft (reserved replans, as in call 1) and, for
# GPT-2, with its reserved memory capped at the budget (limit:hard, the plan filling 92% of it).
set -o pipefail
export PYTHONUNBUFFERED=1 TIERPACK_CUDA_LIB=$PWD/.devcarry/lib/libtierpack_cuda.so
D=bench/results/gpu-h200-2026-12-01-3
C=$(cat $D/COMMIT2)
{ echo "commit $C"; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; python3 -c 'import torch;print("torch",torch.__version__)'; } | tee $OUT/env2.txt
PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True timeout 60 python3 bench/gpu/expandable_cost.py 2>&1 | tee $OUT/call2_expandable.txt
B="python3 bench/gpu/models_bench.py --lib $TIERPACK_CUDA_LIB --steps 4 --warmup 2 --tierpack-warmup 8 --child-timeout 70 --commit $C --logs /tmp/logs"
timeout 160 $B --models gpt2 --modes default,ckpt,tierpack --budgets 75 --at-ckpt-budgets 100 \
  --json $OUT/call2_gpt2.json 2>&1 | tee $OUT/call2_bench.txt
mkdir -p /tmp/logs/hard
timeout 150 $B --logs /tmp/logs/hard --models gpt2 --modes default,ckpt,tierpack --budgets 75 --at-ckpt-budgets 100 \
  --gpu-options limit:hard,fill:0.92 --json $OUT/call2_gpt2_hard.json 2>&1 | tee -a $OUT/call2_bench.txt
timeout 170 $B --models llama --modes default,ckpt,tierpack --budgets 75 --at-ckpt-budgets 100 \
  --json $OUT/call2_llama.json 2>&1 | tee -a $OUT/call2_bench.txt
tar czf $OUT/call2_logs.tgz -C /tmp logs 2>/dev/null
