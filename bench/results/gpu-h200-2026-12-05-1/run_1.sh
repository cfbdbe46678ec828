#!/bin/bash
# Session 31, device call 1 (commit COMMIT): the first H200 run of Note [Budget]'s diagnostic (session 30: a plan's
# first iteration reads the allocator's peak at every call and names the call after which live bytes passed the
# planned peak). ResNet-50: default, checkpointing, tierpack at 60% of checkpointing's NVML peak (session 30: its plans
# passed their planned peak by 0.35-0.97 GiB, cause unknown). The Llama-style decoder: default and tierpack at 75% of
# the default's peak, with one more step under cProfile (--profile python: where the hooks' host time goes).
export PYTHONUNBUFFERED=1 TIERPACK_CUDA_LIB=$PWD/.devcarry/lib/libtierpack_cuda.so
D=bench/results/gpu-h200-2026-12-05-1
N=1
rm -rf /tmp/logs
{ echo "commit $(cat $D/COMMIT)"; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; python3 -c 'import torch, transformers;print("torch",torch.__version__, "transformers", transformers.__version__)'; } > $OUT/env$N.txt
cat $OUT/env$N.txt
run() {  # model modes budgets at-ckpt-budgets timeout [more options]
  timeout $5 python3 bench/gpu/models_bench.py --lib $TIERPACK_CUDA_LIB --steps 4 --warmup 3 --tierpack-warmup 14 --child-timeout 100 \
    --commit $(cat $D/COMMIT) --logs /tmp/logs --models $1 --modes $2 --budgets "$3" ${4:+--at-ckpt-budgets $4} $6 \
    --json $OUT/call${N}_$1.json > $OUT/call${N}_$1.txt 2>&1
  echo "rc=$?" >> $OUT/call${N}_$1.txt
  grep -v "^step" $OUT/call${N}_$1.txt | grep "^|\|rc=\|^- "
  python3 bench/gpu/iterations_table.py $OUT/call${N}_$1.json > $OUT/call${N}_$1_iterations.md 2>&1
  tar czf $OUT/call${N}_logs.tgz -C /tmp logs 2>/dev/null
}
run resnet50 default,ckpt,tierpack "" 60 160
run llama default,tierpack 75 "" 170 "--profile python"
grep -h "^#\|^| [4-9] \|^| 1[0-8] " $OUT/call${N}_*_iterations.md | cut -c1-110
grep -h "plan from\|passed\|host's time\|Error\|error" /tmp/logs/*tierpack* | cut -c1-260 | head -40
