#!/bin/bash
# Session 23, device call 1: where the time and the memory go (GPT-2 large and the Llama-style decoder at 75%):
# one profiled step per cell (per-stream busy/idle), the allocator's reserved peak per iteration, soft vs hard limit;
# then the CUDA test. Run from the repository root with a stripped libtierpack_cuda.so in .devcarry/lib.
set -o pipefail
export PYTHONUNBUFFERED=1 TIERPACK_CUDA_LIB=$PWD/.devcarry/lib/libtierpack_cuda.so
D=bench/results/gpu-h200-2026-12-01-2
C=$(cat $D/COMMIT)
{ echo "commit $C"; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; python3 -c 'import torch;print("torch",torch.__version__)'; } | tee $OUT/env.txt
B="python3 bench/gpu/models_bench.py --lib $TIERPACK_CUDA_LIB --steps 5 --warmup 2 --tierpack-warmup 6 --child-timeout 70 --commit $C --logs /tmp/logs --profile summary"
timeout 150 $B --models gpt2 --modes default,tierpack --budgets 75,60 --json $OUT/call1_gpt2.json 2>&1 | tee $OUT/call1_bench.txt
timeout 80 $B --models gpt2 --modes tierpack --budgets 75 --gpu-options limit:hard --json $OUT/call1_gpt2_hard.json 2>&1 | tee -a $OUT/call1_bench.txt
timeout 100 $B --models llama --modes default,tierpack --budgets 75 --json $OUT/call1_llama.json 2>&1 | tee -a $OUT/call1_bench.txt
timeout 120 python3 tests/integrations/python/storage_mover_cuda_test.py -v 2>&1 | tail -40 | tee $OUT/call1_cuda_test.txt
tar czf $OUT/call1_logs.tgz -C /tmp logs 2>/dev/null
