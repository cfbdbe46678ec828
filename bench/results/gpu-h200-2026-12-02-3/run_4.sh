#!/bin/bash
# Session 27, device call 4 (commit COMMIT4): recomputation times measured and the plan made again with them
# (Note [Measured recomputation] in python/tierpack/activations.py). The storage mover's CUDA test, then Hugging Face
# GPT-2 large and the Llama-style decoder at 75% of the default's NVML peak (limit:soft, 14 warm-up steps for tierpack).
export PYTHONUNBUFFERED=1 TIERPACK_CUDA_LIB=$PWD/.devcarry/lib/libtierpack_cuda.so
D=bench/results/gpu-h200-2026-12-02-3
{ echo "commit $(cat $D/COMMIT4)"; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; python3 -c 'import torch, transformers;print("torch",torch.__version__, "transformers", transformers.__version__)'; } > $OUT/env4.txt
{ timeout 130 python3 tests/integrations/python/storage_mover_cuda_test.py -v 2>&1; echo "rc=$?"; } > $OUT/call4_cuda_test.txt
tail -4 $OUT/call4_cuda_test.txt
timeout 220 python3 bench/gpu/models_bench.py --lib $TIERPACK_CUDA_LIB --steps 4 --warmup 3 --tierpack-warmup 14 --child-timeout 100 \
  --commit $(cat $D/COMMIT4) --logs /tmp/logs --models hf-gpt2,llama --modes default,tierpack --budgets 75 \
  --json $OUT/call4_models.json > $OUT/call4_bench.txt 2>&1
echo "rc=$?" >> $OUT/call4_bench.txt
tar czf $OUT/call4_logs.tgz -C /tmp logs 2>/dev/null
grep -v "^step" $OUT/call4_bench.txt | grep "^|\|^#\|rc="
grep -h "plan from\|held\|made .* again in\|scaled" /tmp/logs/*tierpack* | cut -c1-220 | head -30
