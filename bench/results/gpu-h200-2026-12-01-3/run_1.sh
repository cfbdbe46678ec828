#!/bin/bash
# Session 24, device call 1: the first GPU measurement of recompute (issue 23). GPT-2 large and the Llama-style
# decoder: default, checkpointing, tierpack (recompute on) and tierpack-copy (recompute off) at 75% of the default
# NVML peak and at 100% of checkpointing's NVML peak.
set -o pipefail
export PYTHONUNBUFFERED=1 TIERPACK_CUDA_LIB=$PWD/.devcarry/lib/libtierpack_cuda.so
D=bench/results/gpu-h200-2026-12-01-3
C=$(cat $D/COMMIT)
{ echo "commit $C"; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; python3 -c 'import torch;print("torch",torch.__version__)'; } | tee $OUT/env1.txt
timeout 570 python3 bench/gpu/models_bench.py --lib $TIERPACK_CUDA_LIB --steps 4 --warmup 2 --tierpack-warmup 8 --child-timeout 70 \
  --commit $C --logs /tmp/logs --models gpt2,llama --modes default,ckpt,tierpack,tierpack-copy --budgets 75 --at-ckpt-budgets 100 \
  --json $OUT/call1.json 2>&1 | tee $OUT/call1_bench.txt
tar czf $OUT/call1_logs.tgz -C /tmp logs 2>/dev/null
