#!/bin/bash
# Session 23, device call 5 (the last minutes of device time): GPT-2 large at 75% and under checkpointing at 60% of its
# peak with the final code (a reserved-memory replan that no plan fits keeps the plan that fitted).
set -o pipefail
export PYTHONUNBUFFERED=1 TIERPACK_CUDA_LIB=$PWD/.devcarry/lib/libtierpack_cuda.so
D=bench/results/gpu-h200-2026-12-01-2
C=$(cat $D/COMMIT)
echo "commit $C" | tee $OUT/env5.txt
timeout 150 python3 bench/gpu/models_bench.py --lib $TIERPACK_CUDA_LIB --steps 4 --warmup 2 --tierpack-warmup 10 --child-timeout 70 \
  --commit $C --logs /tmp/logs --models gpt2 --modes default,ckpt,tierpack,tierpack+ckpt --budgets 75 --ckpt-budgets 60 \
  --json $OUT/call5_gpt2.json 2>&1 | tee $OUT/call5_bench.txt
tar czf $OUT/call5_logs.tgz -C /tmp logs 2>/dev/null
