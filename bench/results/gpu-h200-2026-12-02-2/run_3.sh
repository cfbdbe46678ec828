#!/bin/bash
# Session 26, device call 3: module recompute, its run's storages no longer held to the iteration's end (Note [Module recompute] in python/tierpack/module_recompute.py).
# Hugging Face GPT-2 large and the T5-style encoder-decoder: default,
# checkpointing, tierpack (limit:soft, the default) at 75% of the default's NVML peak and at checkpointing's peak.
export PYTHONUNBUFFERED=1 TIERPACK_CUDA_LIB=$PWD/.devcarry/lib/libtierpack_cuda.so
D=bench/results/gpu-h200-2026-12-02-2
{ echo "commit $(cat $D/COMMIT3)"; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; python3 -c 'import torch, transformers;print("torch",torch.__version__, "transformers", transformers.__version__)'; } > $OUT/env3.txt
timeout 390 python3 bench/gpu/models_bench.py --lib $TIERPACK_CUDA_LIB --steps 4 --warmup 2 --tierpack-warmup 8 --child-timeout 110 --commit $(cat $D/COMMIT3) \
  --logs /tmp/logs --models hf-gpt2,t5 --modes default,ckpt,tierpack --budgets 75 --at-ckpt-budgets 100 --json $OUT/call3_models.json > $OUT/call3_bench.txt 2>&1
echo "rc=$?" >> $OUT/call3_bench.txt
tar czf $OUT/call3_logs.tgz -C /tmp logs 2>/dev/null
grep -v "^step" $OUT/call3_bench.txt | grep "^|\|^  "
grep -h "modules run again\|plan from" /tmp/logs/* | cut -c1-400 | head -12
