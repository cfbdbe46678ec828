#!/bin/bash
# Session 24, device call 4 (same code as call 3): the encoder-decoder and ResNet-50, default, checkpointing
# and tierpack at 75% of the default peak.
set -o pipefail
export PYTHONUNBUFFERED=1 TIERPACK_CUDA_LIB=$PWD/.devcarry/lib/libtierpack_cuda.so
D=bench/results/gpu-h200-2026-12-01-3
C=$(cat $D/COMMIT3)
echo "commit $C" | tee $OUT/env4.txt
timeout 190 python3 bench/gpu/models_bench.py --lib $TIERPACK_CUDA_LIB --steps 4 --warmup 2 --tierpack-warmup 8 --child-timeout 70 \
  --commit $C --logs /tmp/logs --models t5,resnet50 --modes default,ckpt,tierpack --budgets 75 \
  --json $OUT/call4_t5_resnet.json 2>&1 | tee $OUT/call4_bench.txt
tar czf $OUT/call4_logs.tgz -C /tmp logs 2>/dev/null
