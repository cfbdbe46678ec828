#!/bin/bash
# Session 23, device call 3: the CUDA tests (with the Hugging Face gradient-checkpointing watchdog), then GPT-2 large
# and the Llama-style decoder with the reserved-memory replans (Note [Reserved memory]): default, checkpointing,
# tierpack at 75/60/45% of the default NVML peak, tierpack under checkpointing at 60% of its peak.
set -o pipefail
export PYTHONUNBUFFERED=1 TIERPACK_CUDA_LIB=$PWD/.devcarry/lib/libtierpack_cuda.so
D=bench/results/gpu-h200-2026-12-01-2
C=$(cat $D/COMMIT)
{ echo "commit $C"; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; python3 -c 'import torch;print("torch",torch.__version__)'; } | tee $OUT/env3.txt
timeout 150 python3 tests/integrations/python/storage_mover_cuda_test.py -v 2>&1 | tail -40 | tee $OUT/call3_cuda_test.txt
B="python3 bench/gpu/models_bench.py --lib $TIERPACK_CUDA_LIB --steps 4 --warmup 2 --tierpack-warmup 10 --child-timeout 80 --commit $C --logs /tmp/logs"
timeout 230 $B --models gpt2 --modes default,ckpt,tierpack,tierpack+ckpt --budgets 75,60,45 --ckpt-budgets 60 --json $OUT/call3_gpt2.json 2>&1 | tee $OUT/call3_bench.txt
timeout 170 $B --models llama --modes default,ckpt,tierpack --budgets 75,60 --json $OUT/call3_llama.json 2>&1 | tee -a $OUT/call3_bench.txt
tar czf $OUT/call3_logs.tgz -C /tmp logs 2>/dev/null
