#!/bin/bash
# Session 30, device call 2 (commit COMMIT2): as call 1 (two timed iterations, reactive warm-up, Note [Block
# inputs]) on ResNet-50 and the T5-style encoder-decoder: default, checkpointing, tierpack at 75% of the default's
# NVML peak, at checkpointing's peak and at 60% of it (T5: not at checkpointing's peak). Each tierpack cell's
# statistics and recorded iteration (.gpu0.saved.json) are in the logs (models_bench --logs).
export PYTHONUNBUFFERED=1 TIERPACK_CUDA_LIB=$PWD/.devcarry/lib/libtierpack_cuda.so
D=bench/results/gpu-h200-2026-12-04-1
rm -rf /tmp/logs
{ echo "commit $(cat $D/COMMIT2)"; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; python3 -c 'import torch, transformers;print("torch",torch.__version__, "transformers", transformers.__version__)'; } > $OUT/env2.txt
cat $OUT/env2.txt
run() {  # model modes budgets at-ckpt-budgets timeout
  timeout $5 python3 bench/gpu/models_bench.py --lib $TIERPACK_CUDA_LIB --steps 4 --warmup 3 --tierpack-warmup 14 --child-timeout 100 \
    --commit $(cat $D/COMMIT2) --logs /tmp/logs --models $1 --modes $2 --budgets $3 ${4:+--at-ckpt-budgets $4} \
    --json $OUT/call2_$1.json > $OUT/call2_$1.txt 2>&1
  echo "rc=$?" >> $OUT/call2_$1.txt
  grep -v "^step" $OUT/call2_$1.txt | grep "^|\|rc=\|^- "
  python3 bench/gpu/iterations_table.py $OUT/call2_$1.json > $OUT/call2_$1_iterations.md 2>&1
  tar czf $OUT/call2_logs.tgz -C /tmp logs 2>/dev/null
}
run resnet50 default,ckpt,tierpack 75 100,60 330
run t5 default,ckpt,tierpack 75 60 255
cut -c1-110 $OUT/call2_*_iterations.md
grep -h "plan from\|host's time\|Error\|error" /tmp/logs/*tierpack* | cut -c1-240 | head -30
