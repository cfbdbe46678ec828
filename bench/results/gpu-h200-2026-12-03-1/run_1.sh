#!/bin/bash
# Session 29, device call 1 (commit COMMIT): session 28's last code, first time on the H200 -- batched moves (Note
# [Batched moves]), blocks left out of the recalibration, per-call block verdicts, T5 built with use_cache=False.
# The storage mover's CUDA tests, then the T5-style encoder-decoder and ResNet-50: default, checkpointing, tierpack
# (limit:soft) at 75% of the default's NVML peak, at checkpointing's peak and at 60% of it; 14 warm-up steps for tierpack.
export PYTHONUNBUFFERED=1 TIERPACK_CUDA_LIB=$PWD/.devcarry/lib/libtierpack_cuda.so
D=bench/results/gpu-h200-2026-12-03-1
{ echo "commit $(cat $D/COMMIT)"; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; python3 -c 'import torch, transformers;print("torch",torch.__version__, "transformers", transformers.__version__)'; } > $OUT/env1.txt
{ timeout 130 python3 tests/integrations/python/storage_mover_cuda_test.py -v 2>&1; echo "rc=$?"; } > $OUT/call1_cuda_test.txt
tail -3 $OUT/call1_cuda_test.txt
timeout 420 python3 bench/gpu/models_bench.py --lib $TIERPACK_CUDA_LIB --steps 4 --warmup 3 --tierpack-warmup 14 --child-timeout 110 \
  --commit $(cat $D/COMMIT) --logs /tmp/logs --models t5,resnet50 --modes default,ckpt,tierpack --budgets 75 --at-ckpt-budgets 100,60 \
  --json $OUT/call1_models.json > $OUT/call1_bench.txt 2>&1
echo "rc=$?" >> $OUT/call1_bench.txt
tar czf $OUT/call1_logs.tgz -C /tmp logs 2>/dev/null
grep -v "^step" $OUT/call1_bench.txt | grep "^|\|^#\|rc=\|^- "
grep -h "plan from\|held\|made .* again in\|scaled\|blocks that\|Error\|error" /tmp/logs/*tierpack* | cut -c1-220 | head -30
