#!/bin/bash
# Session 23, device call 2: where the reserved memory goes. GPT-2 large at 75% with the allocator's history of one
# planned step (expandable segments, as tierpack sets them), then the same cell under the plain caching allocator
# (expandable_segments:False) and with sizes rounded to 4 classes per power of two; the Llama-style decoder likewise.
set -o pipefail
export PYTHONUNBUFFERED=1 TIERPACK_CUDA_LIB=$PWD/.devcarry/lib/libtierpack_cuda.so
D=bench/results/gpu-h200-2026-12-01-2
C=$(cat $D/COMMIT)
{ echo "commit $C"; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; python3 -c 'import torch;print("torch",torch.__version__)'; } | tee $OUT/env2.txt
B="python3 bench/gpu/models_bench.py --lib $TIERPACK_CUDA_LIB --steps 5 --warmup 2 --tierpack-warmup 6 --child-timeout 70 --commit $C --logs /tmp/logs --modes default,tierpack --budgets 75"
mkdir -p /tmp/snap
timeout 90 $B --models gpt2 --snapshot /tmp/snap/es --json $OUT/call2_es.json 2>&1 | tee $OUT/call2_bench.txt
PYTORCH_CUDA_ALLOC_CONF=expandable_segments:False timeout 150 $B --models gpt2,llama --json $OUT/call2_noes.json 2>&1 | tee -a $OUT/call2_bench.txt
PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True,roundup_power2_divisions:4 timeout 90 $B --models gpt2 --json $OUT/call2_round.json 2>&1 | tee -a $OUT/call2_bench.txt
tar czf $OUT/call2_logs.tgz -C /tmp logs snap 2>/dev/null; ls -la $OUT
