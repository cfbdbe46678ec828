#!/bin/bash
# Session 24, device call 4 (the last device minutes): after call 3's out-of-memory errors under the hard limit
# with fill 0.92, fill 0.88 (and recipes found even where the recorded iteration let an input go). The CUDA
# tests; the Llama-style decoder (default, checkpointing, tierpack at 75% and at checkpointing's peak); GPT-2
# large at 75%.
set -o pipefail
export PYTHONUNBUFFERED=1 TIERPACK_CUDA_LIB=$PWD/.devcarry/lib/libtierpack_cuda.so
D=bench/results/gpu-h200-2026-12-01-3
C=$(cat $D/COMMIT4)
echo "commit $C" | tee $OUT/env4.txt
timeout 120 python3 tests/integrations/python/storage_mover_cuda_test.py -v 2>&1 | tail -40 | tee $OUT/call4_cuda_test.txt
B="python3 bench/gpu/models_bench.py --lib $TIERPACK_CUDA_LIB --steps 4 --warmup 2 --tierpack-warmup 8 --child-timeout 60 --commit $C --logs /tmp/logs"
timeout 125 $B --models llama --modes default,ckpt,tierpack --budgets 75 --at-ckpt-budgets 100 \
  --json $OUT/call4_llama.json 2>&1 | tee $OUT/call4_bench.txt
timeout 60 $B --models gpt2 --modes default,tierpack --budgets 75 --json $OUT/call4_gpt2.json 2>&1 | tee -a $OUT/call4_bench.txt
tar czf $OUT/call4_logs.tgz -C /tmp logs 2>/dev/null
