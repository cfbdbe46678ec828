#!/bin/bash
# Session 30, device call 4 (commit COMMIT4): a block run again holds only the members it hands back (its duplicates
# of members copied out or kept are freed as its forward goes on: call 3's ResNet-50 plan at 60% of checkpointing's
# peak held 1.15 GiB of them at its first bottleneck's run), and the plan leaves room for the largest of them.
# ResNet-50: default, checkpointing, tierpack at 75% of the default's NVML peak, at checkpointing's peak and at 60%
# of it; Hugging Face GPT-2 large: default, checkpointing, tierpack at checkpointing's peak.
export PYTHONUNBUFFERED=1 TIERPACK_CUDA_LIB=$PWD/.devcarry/lib/libtierpack_cuda.so
D=bench/results/gpu-h200-2026-12-04-1
rm -rf /tmp/logs
{ echo "commit $(cat $D/COMMIT4)"; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; python3 -c 'import torch, transformers;print("torch",torch.__version__, "transformers", transformers.__version__)'; } > $OUT/env4.txt
cat $OUT/env4.txt
run() {  # model modes budgets at-ckpt-budgets timeout
  timeout $5 python3 bench/gpu/models_bench.py --lib $TIERPACK_CUDA_LIB --steps 4 --warmup 3 --tierpack-warmup 14 --child-timeout 100 \
    --commit $(cat $D/COMMIT4) --logs /tmp/logs --models $1 --modes $2 --budgets "$3" ${4:+--at-ckpt-budgets $4} \
    --json $OUT/call4_$1.json > $OUT/call4_$1.txt 2>&1
  echo "rc=$?" >> $OUT/call4_$1.txt
  grep -v "^step" $OUT/call4_$1.txt | grep "^|\|rc=\|^- "
  python3 bench/gpu/iterations_table.py $OUT/call4_$1.json > $OUT/call4_$1_iterations.md 2>&1
  tar czf $OUT/call4_logs.tgz -C /tmp logs 2>/dev/null
}
run resnet50 default,ckpt,tierpack 75 100,60 150
run hf-gpt2 default,ckpt,tierpack "" 100 140
grep -h "^#\|^| 1[5-8] " $OUT/call4_*_iterations.md | cut -c1-110
grep -h "plan from\|host's time\|Error\|error" /tmp/logs/*tierpack* | cut -c1-240 | head -30
