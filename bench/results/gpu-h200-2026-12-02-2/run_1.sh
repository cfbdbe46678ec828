#!/bin/bash
# Session 26, device call 1: module recompute (Note [Module recompute] in python/tierpack/module_recompute.py).
# The storage mover's CUDA test, then Hugging Face GPT-2 large and the T5-style encoder-decoder: default,
# checkpointing, tierpack (limit:soft, the default) at 75% of the default's NVML peak and at checkpointing's peak.
export PYTHONUNBUFFERED=1 TIERPACK_CUDA_LIB=$PWD/.devcarry/lib/libtierpack_cuda.so
D=bench/results/gpu-h200-2026-12-02-2
{ echo "commit $(cat $D/COMMIT)"; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; python3 -c 'import torch, transformers;print("torch",torch.__version__, "transformers", transformers.__version__)'; } > $OUT/env1.txt
timeout 150 python3 tests/integrations/python/storage_mover_cuda_test.py -v > $OUT/call1_cuda_test.txt 2>&1
echo "rc=$?" >> $OUT/call1_cuda_test.txt
timeout 390 python3 bench/gpu/models_bench.py --lib $TIERPACK_CUDA_LIB --steps 4 --warmup 2 --tierpack-warmup 8 --child-timeout 110 --commit $(cat $D/COMMIT) \
  --logs /tmp/logs --models hf-gpt2,t5 --modes default,ckpt,tierpack --budgets 75 --at-ckpt-budgets 100 --json $OUT/call1_models.json > $OUT/call1_bench.txt 2>&1
echo "rc=$?" >> $OUT/call1_bench.txt
tar czf $OUT/call1_logs.tgz -C /tmp logs 2>/dev/null
tail -5 $OUT/call1_cuda_test.txt; grep -v "^step" $OUT/call1_bench.txt | tail -30
grep -h "modules run again\|plan from" /tmp/logs/* | cut -c1-400 | head -12
