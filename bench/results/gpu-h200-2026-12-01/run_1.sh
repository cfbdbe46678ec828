#!/bin/bash
# GPU tier v2, device call 1: the storage mover's CUDA test, the copy bench, and GPT-2 large under budgets.
# Run from the repository root with a stripped libtierpack_cuda.so carried in .devcarry/lib (built on the Debian machine).
set -o pipefail
export PYTHONUNBUFFERED=1 TIERPACK_CUDA_LIB=$PWD/.devcarry/lib/libtierpack_cuda.so
{ echo "commit $(cat bench/results/gpu-h200-2026-12-01/COMMIT)"
  nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; python3 -c 'import torch;print("torch",torch.__version__)'; } | tee $OUT/env.txt
timeout 240 python3 tests/integrations/python/storage_mover_cuda_test.py -v 2>&1 | tail -40 | tee $OUT/call1_cuda_test.txt
timeout 90 python3 bench/gpu/storage_copy_bench.py --json $OUT/call1_copy.json 2>&1 | tee $OUT/call1_copy.txt
timeout 250 python3 bench/gpu/models_bench.py --lib $TIERPACK_CUDA_LIB --models gpt2 --modes default,ckpt,tierpack,tierpack+ckpt --budgets 100,75,60,45 \
  --ckpt-budgets 60 --steps 8 --warmup 3 --tierpack-warmup 5 --json $OUT/call1_gpt2.json --logs /tmp/logs 2>&1 | tee $OUT/call1_bench.txt
tar czf $OUT/call1_logs.tgz -C /tmp logs 2>/dev/null
