#!/bin/bash
# Session 30, device call 1 (commit COMMIT): first time on the H200 for session 29's last two changes — two timed
# iterations (Note [Recording]) and the warm-up that copies out only what it lets go (Note [Reactive moves]) —
# and for this session's Note [Block inputs] (placer/saved_plan.cpp: a block's inputs copied out and back by its
# run, for budgets under checkpointing's peak). The storage mover's CUDA tests (the whole file); the Llama-style
# decoder: default, checkpointing, tierpack at 75% of the default's NVML peak, at checkpointing's peak and at 60%
# of it; Hugging Face GPT-2 large: default and tierpack at 75%. Per-iteration tables from the JSON
# (bench/gpu/iterations_table.py).
export PYTHONUNBUFFERED=1 TIERPACK_CUDA_LIB=$PWD/.devcarry/lib/libtierpack_cuda.so
D=bench/results/gpu-h200-2026-12-04-1
rm -rf /tmp/logs
{ echo "commit $(cat $D/COMMIT)"; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; python3 -c 'import torch, transformers;print("torch",torch.__version__, "transformers", transformers.__version__)'; } > $OUT/env1.txt
{ timeout 150 python3 tests/integrations/python/storage_mover_cuda_test.py -v 2>&1; echo "rc=$?"; } > $OUT/call1_cuda_test.txt
tail -4 $OUT/call1_cuda_test.txt
run() {  # model modes budgets at-ckpt-budgets timeout
  timeout $5 python3 bench/gpu/models_bench.py --lib $TIERPACK_CUDA_LIB --steps 4 --warmup 3 --tierpack-warmup 14 --child-timeout 100 \
    --commit $(cat $D/COMMIT) --logs /tmp/logs --models $1 --modes $2 --budgets $3 ${4:+--at-ckpt-budgets $4} \
    --json $OUT/call1_$1.json > $OUT/call1_$1.txt 2>&1
  echo "rc=$?" >> $OUT/call1_$1.txt
  grep -v "^step" $OUT/call1_$1.txt | grep "^|\|rc=\|^- "
  python3 bench/gpu/iterations_table.py $OUT/call1_$1.json > $OUT/call1_$1_iterations.md 2>&1
  tar czf $OUT/call1_logs.tgz -C /tmp logs 2>/dev/null
}
run llama default,ckpt,tierpack 75 100,60 260
run hf-gpt2 default,tierpack 75 "" 130
cut -c1-110 $OUT/call1_*_iterations.md
grep -h "plan from\|host's time\|Error\|error" /tmp/logs/*tierpack* | cut -c1-240 | head -30
