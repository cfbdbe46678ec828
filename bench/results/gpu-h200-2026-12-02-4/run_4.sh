#!/bin/bash
# Session 28, device call 4 (commit COMMIT4): the planner compares its family with and without blocks (Note [Block
# recompute]). Hugging Face GPT-2 large: default, checkpointing, tierpack at 75% of the default's NVML peak and at
# checkpointing's peak.
export PYTHONUNBUFFERED=1 TIERPACK_CUDA_LIB=$PWD/.devcarry/lib/libtierpack_cuda.so
D=bench/results/gpu-h200-2026-12-02-4
{ echo "commit $(cat $D/COMMIT4)"; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; python3 -c 'import torch, transformers;print("torch",torch.__version__, "transformers", transformers.__version__)'; } > $OUT/env4.txt
timeout 235 python3 bench/gpu/models_bench.py --lib $TIERPACK_CUDA_LIB --steps 4 --warmup 3 --tierpack-warmup 14 --child-timeout 95 \
  --commit $(cat $D/COMMIT4) --logs /tmp/logs --models hf-gpt2 --modes default,ckpt,tierpack --budgets 75 --at-ckpt-budgets 100 \
  --json $OUT/call4_models.json > $OUT/call4_bench.txt 2>&1
echo "rc=$?" >> $OUT/call4_bench.txt
tar czf $OUT/call4_logs.tgz -C /tmp logs 2>/dev/null
grep -v "^step" $OUT/call4_bench.txt | grep "^|\|^#\|rc=\|^- "
grep -h "plan from\|held\|made .* again in\|scaled\|Error\|error" /tmp/logs/*tierpack* | cut -c1-200 | head -20
