#!/bin/bash
# Session 28, device call 2 (commit COMMIT2): blocks run again (Note [Block recompute] in
# python/tierpack/module_recompute.py): a transformer layer is a recompute option the planner weighs against copies. The storage mover's CUDA test, then Hugging Face GPT-2 large and the Llama-style decoder:
# default, checkpointing, tierpack (limit:soft) at 75% of the default's NVML peak and at checkpointing's peak,
# 14 warm-up steps for tierpack.
export PYTHONUNBUFFERED=1 TIERPACK_CUDA_LIB=$PWD/.devcarry/lib/libtierpack_cuda.so
D=bench/results/gpu-h200-2026-12-02-4
{ echo "commit $(cat $D/COMMIT2)"; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; python3 -c 'import torch, transformers;print("torch",torch.__version__, "transformers", transformers.__version__)'; } > $OUT/env2.txt
{ timeout 130 python3 tests/integrations/python/storage_mover_cuda_test.py -v 2>&1; echo "rc=$?"; } > $OUT/call2_cuda_test.txt
tail -3 $OUT/call2_cuda_test.txt
timeout 420 python3 bench/gpu/models_bench.py --lib $TIERPACK_CUDA_LIB --steps 4 --warmup 3 --tierpack-warmup 14 --child-timeout 110 \
  --commit $(cat $D/COMMIT2) --logs /tmp/logs --models hf-gpt2,llama --modes default,ckpt,tierpack --budgets 75 --at-ckpt-budgets 100 \
  --json $OUT/call2_models.json > $OUT/call2_bench.txt 2>&1
echo "rc=$?" >> $OUT/call2_bench.txt
tar czf $OUT/call2_logs.tgz -C /tmp logs 2>/dev/null
grep -v "^step" $OUT/call2_bench.txt | grep "^|\|^#\|rc=\|^- "
grep -h "plan from\|held\|made .* again in\|scaled\|blocks that\|Error\|error" /tmp/logs/*tierpack* | cut -c1-220 | head -30
