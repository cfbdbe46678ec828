#!/bin/bash
# Session 23, device call 4 (the last of this session's device time): the CUDA tests after the fitting-plan fix, the
# encoder-decoder and ResNet-50 (default, checkpointing, tierpack at 75%), GPT-2 large under torch.compile with an
# activation memory budget of 0.5.
set -o pipefail
export PYTHONUNBUFFERED=1 TIERPACK_CUDA_LIB=$PWD/.devcarry/lib/libtierpack_cuda.so
D=bench/results/gpu-h200-2026-12-01-2
C=$(cat $D/COMMIT)
{ echo "commit $C"; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; python3 -c 'import torch;print("torch",torch.__version__)'; } | tee $OUT/env4.txt
timeout 150 python3 tests/integrations/python/storage_mover_cuda_test.py -v 2>&1 | tail -30 | tee $OUT/call4_cuda_test.txt
B="python3 bench/gpu/models_bench.py --lib $TIERPACK_CUDA_LIB --steps 4 --warmup 2 --tierpack-warmup 10 --child-timeout 80 --commit $C --logs /tmp/logs"
timeout 200 $B --models t5,resnet50 --modes default,ckpt,tierpack --budgets 75 --json $OUT/call4_t5_resnet.json 2>&1 | tee $OUT/call4_bench.txt
timeout 150 $B --models gpt2 --modes default,compile-0.5 --child-timeout 130 --json $OUT/call4_gpt2_compile.json 2>&1 | tee -a $OUT/call4_bench.txt
tar czf $OUT/call4_logs.tgz -C /tmp logs 2>/dev/null
