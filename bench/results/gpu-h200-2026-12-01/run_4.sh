#!/bin/bash
# GPU tier v2, device call 4 (the last of this session's device time): the four models at the budgets the time
# left allowed, after call 3's fixes (Note [Recording]; records no longer hold saved storages to the iteration's end).
# Run from the repository root with a stripped libtierpack_cuda.so carried in .devcarry/lib (built on the Debian machine).
set -o pipefail
export PYTHONUNBUFFERED=1 TIERPACK_CUDA_LIB=$PWD/.devcarry/lib/libtierpack_cuda.so
C=$(cat bench/results/gpu-h200-2026-12-01/COMMIT)
{ echo "commit $C"; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; python3 -c 'import torch;print("torch",torch.__version__)'; } | tee $OUT/env.txt
timeout 105 python3 bench/gpu/models_bench.py --lib $TIERPACK_CUDA_LIB --models gpt2 --modes default,tierpack --budgets 75,60 \
  --steps 5 --warmup 2 --tierpack-warmup 6 --child-timeout 60 --commit $C --json $OUT/call4_gpt2.json --logs /tmp/logs 2>&1 | tee $OUT/call4_bench.txt
timeout 125 python3 bench/gpu/models_bench.py --lib $TIERPACK_CUDA_LIB --models llama,t5,resnet50 --modes default,tierpack --budgets 75 \
  --steps 5 --warmup 2 --tierpack-warmup 6 --child-timeout 50 --commit $C --json $OUT/call4_others.json --logs /tmp/logs 2>&1 | tee -a $OUT/call4_bench.txt
tar czf $OUT/call4_logs.tgz -C /tmp logs 2>/dev/null
