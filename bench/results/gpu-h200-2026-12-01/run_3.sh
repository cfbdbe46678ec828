#!/bin/bash
# GPU tier v2, device call 3: the storage mover's CUDA test, then the four models' table (the rows this call's
# device time allowed: default, checkpointing, tierpack at 100/75/60/45% of default's peak, tierpack under
# checkpointing at 60% of its peak; 5 timed steps each).
# Run from the repository root with a stripped libtierpack_cuda.so carried in .devcarry/lib (built on the Debian machine).
set -o pipefail
export PYTHONUNBUFFERED=1 TIERPACK_CUDA_LIB=$PWD/.devcarry/lib/libtierpack_cuda.so
{ echo "commit $(cat bench/results/gpu-h200-2026-12-01/COMMIT)"
  nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; python3 -c 'import torch;print("torch",torch.__version__)'; } | tee $OUT/env.txt
timeout 110 python3 tests/integrations/python/storage_mover_cuda_test.py -v 2>&1 | tail -30 | tee $OUT/call3_cuda_test.txt
timeout 470 python3 bench/gpu/models_bench.py --lib $TIERPACK_CUDA_LIB --models gpt2,llama,t5,resnet50 \
  --modes default,ckpt,tierpack,tierpack+ckpt --budgets 100,75,60,45 --ckpt-budgets 60 --steps 5 --warmup 2 \
  --tierpack-warmup 5 --child-timeout 90 --commit $(cat bench/results/gpu-h200-2026-12-01/COMMIT) \
  --json $OUT/call3_bench.json --logs /tmp/logs 2>&1 | tee $OUT/call3_bench.txt
tar czf $OUT/call3_logs.tgz -C /tmp logs 2>/dev/null
