#!/bin/bash
# Session 29, device call 2 (commit COMMIT2): blocks are the innermost repeated layers (ResNet-50's bottlenecks
# rather than its stages). T5-style at 75% with one more step under cProfile per cell (where the hooks' host time
# goes); ResNet-50 and the Llama-style decoder: default, checkpointing, tierpack at 75% of the default's NVML peak,
# at checkpointing's peak and at 60% of it.
export PYTHONUNBUFFERED=1 TIERPACK_CUDA_LIB=$PWD/.devcarry/lib/libtierpack_cuda.so
D=bench/results/gpu-h200-2026-12-03-1
rm -rf /tmp/logs /tmp/logs2
{ echo "commit $(cat $D/COMMIT2)"; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; python3 -c 'import torch, transformers;print("torch",torch.__version__, "transformers", transformers.__version__)'; } > $OUT/env2.txt
timeout 130 python3 bench/gpu/models_bench.py --lib $TIERPACK_CUDA_LIB --steps 4 --warmup 3 --tierpack-warmup 14 --child-timeout 100 \
  --commit $(cat $D/COMMIT2) --logs /tmp/logs2 --models t5 --modes default,tierpack --budgets 75 --profile python \
  --json $OUT/call2_t5.json > $OUT/call2_t5.txt 2>&1
echo "rc=$?" >> $OUT/call2_t5.txt
grep -v "^step" $OUT/call2_t5.txt | grep "^|\|rc=\|^- "
timeout 340 python3 bench/gpu/models_bench.py --lib $TIERPACK_CUDA_LIB --steps 4 --warmup 3 --tierpack-warmup 14 --child-timeout 90 \
  --commit $(cat $D/COMMIT2) --logs /tmp/logs --models resnet50,llama --modes default,ckpt,tierpack --budgets 75 --at-ckpt-budgets 100,60 \
  --json $OUT/call2_models.json > $OUT/call2_bench.txt 2>&1
echo "rc=$?" >> $OUT/call2_bench.txt
tar czf $OUT/call2_logs.tgz -C /tmp logs logs2 2>/dev/null
grep -v "^step" $OUT/call2_bench.txt | grep "^|\|^#\|rc=\|^- "
grep -h "plan from\|held\|blocks that\|Error\|error" /tmp/logs/*tierpack* | cut -c1-200 | head -24
grep -h -A40 "python profile" /tmp/logs2/t5_tierpack* | cut -c1-160
