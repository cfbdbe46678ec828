#!/bin/bash
# Session 24, device call 3 (final code: the budget is PyTorch's memory limit by default, fill 0.92; recipes
# through views; autocast's held casts; recompute chains). The CUDA tests; GPT-2 large and the Llama-style
# decoder: default, checkpointing, tierpack (recompute on) at 75% of the default peak and at checkpointing's
# peak; GPT-2 also under checkpointing at 60% of its peak, and without recompute at 75%.
set -o pipefail
export PYTHONUNBUFFERED=1 TIERPACK_CUDA_LIB=$PWD/.devcarry/lib/libtierpack_cuda.so
D=bench/results/gpu-h200-2026-12-01-3
C=$(cat $D/COMMIT3)
{ echo "commit $C"; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; python3 -c 'import torch;print("torch",torch.__version__)'; } | tee $OUT/env3.txt
timeout 130 python3 tests/integrations/python/storage_mover_cuda_test.py -v 2>&1 | tail -30 | tee $OUT/call3_cuda_test.txt
B="python3 bench/gpu/models_bench.py --lib $TIERPACK_CUDA_LIB --steps 4 --warmup 2 --tierpack-warmup 8 --child-timeout 70 --commit $C --logs /tmp/logs"
timeout 150 $B --models gpt2 --modes default,ckpt,tierpack,tierpack+ckpt --budgets 75 --at-ckpt-budgets 100 --ckpt-budgets 60 \
  --json $OUT/call3_gpt2.json 2>&1 | tee $OUT/call3_bench.txt
mkdir -p /tmp/logs/copy
timeout 60 $B --logs /tmp/logs/copy --models gpt2 --modes default,tierpack-copy --budgets 75 \
  --json $OUT/call3_gpt2_copy.json 2>&1 | tee -a $OUT/call3_bench.txt
timeout 140 $B --models llama --modes default,ckpt,tierpack --budgets 75 --at-ckpt-budgets 100 \
  --json $OUT/call3_llama.json 2>&1 | tee -a $OUT/call3_bench.txt
tar czf $OUT/call3_logs.tgz -C /tmp logs 2>/dev/null
