#!/bin/bash
# Session 30, device call 3 (commit COMMIT3): Note [Block run memory] (a block's run again adds its output and
# temporaries where it runs: measured by the recorded iteration's check run, planned for) and, with no plan that
# fits, the plan of least planned peak. ResNet-50, the Llama-style decoder and Hugging Face GPT-2 large: default,
# checkpointing, tierpack at 75% of the default's NVML peak, at checkpointing's peak and at 60% of it.
export PYTHONUNBUFFERED=1 TIERPACK_CUDA_LIB=$PWD/.devcarry/lib/libtierpack_cuda.so
D=bench/results/gpu-h200-2026-12-04-1
rm -rf /tmp/logs
{ echo "commit $(cat $D/COMMIT3)"; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; python3 -c 'import torch, transformers;print("torch",torch.__version__, "transformers", transformers.__version__)'; } > $OUT/env3.txt
cat $OUT/env3.txt
run() {  # model modes budgets at-ckpt-budgets timeout
  timeout $5 python3 bench/gpu/models_bench.py --lib $TIERPACK_CUDA_LIB --steps 4 --warmup 3 --tierpack-warmup 14 --child-timeout 100 \
    --commit $(cat $D/COMMIT3) --logs /tmp/logs --models $1 --modes $2 --budgets $3 ${4:+--at-ckpt-budgets $4} \
    --json $OUT/call3_$1.json > $OUT/call3_$1.txt 2>&1
  echo "rc=$?" >> $OUT/call3_$1.txt
  grep -v "^step" $OUT/call3_$1.txt | grep "^|\|rc=\|^- "
  python3 bench/gpu/iterations_table.py $OUT/call3_$1.json > $OUT/call3_$1_iterations.md 2>&1
  tar czf $OUT/call3_logs.tgz -C /tmp logs 2>/dev/null
}
run resnet50 default,ckpt,tierpack 75 100,60 150
run llama default,ckpt,tierpack 75 100,60 170
run hf-gpt2 default,ckpt,tierpack 75 100,60 200
grep -h "^#\|^| 1[5-8] " $OUT/call3_*_iterations.md | cut -c1-110
grep -h "plan from\|host's time\|Error\|error" /tmp/logs/*tierpack* | cut -c1-240 | head -30
