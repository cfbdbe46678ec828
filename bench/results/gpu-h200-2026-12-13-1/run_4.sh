#!/bin/bash
# Session 39, device call 4 (commit COMMIT4): tierpack under torch.compile at 60% of compile's own peak, where call 3
# found no plan that fits with the default options (GPT-2: the optimizer step reads its 5.76 GiB of state whole;
# ResNet-50: not enough of the compiled graphs' saved bytes can move): with the streamed step (step:stream,limit:hard, what the
# log proposes) and under compile's own activation memory budget 0.5 (tierpack+compile-0.5: the compiler recomputes,
# tierpack copies the rest out). One run per row; each cell under its own time limit, the archive after each.
set -o pipefail
export PYTHONUNBUFFERED=1 TIERPACK_CUDA_LIB=$PWD/.devcarry/lib/libtierpack_cuda.so
D=bench/results/gpu-h200-2026-12-13-1
N=4
O=/tmp/call$N; rm -rf $O /tmp/logs; mkdir -p $O
{ echo "commit $(cat $D/COMMIT$N)"; nvidia-smi --query-gpu=name,driver_version,pcie.link.gen.max,pcie.link.width.max --format=csv,noheader; python3 -c 'import torch, transformers;print("torch",torch.__version__, "transformers", transformers.__version__)'; nproc; grep -m1 "model name" /proc/cpuinfo; } > $O/env$N.txt
cat $O/env$N.txt
START=$(date +%s)
run() {  # name model modes budgets timeout [gpu-options]
  left=$(( 570 - ($(date +%s) - START) ))
  t=$5; [ $left -lt $t ] && t=$left
  [ $t -lt 40 ] && { echo "== $1: skipped, $left s left"; return; }
  timeout $t python3 bench/gpu/models_bench.py --lib $TIERPACK_CUDA_LIB --steps 4 --warmup 3 --tierpack-warmup 18 \
    --child-timeout 200 --commit $(cat $D/COMMIT$N) --logs /tmp/logs/$1 --models $2 --modes $3 --budgets "$4" \
    --compile-budgets 60 ${6:+--gpu-options $6} --json $O/call${N}_$1.json > $O/call${N}_$1.txt 2>&1
  echo "rc=$?" >> $O/call${N}_$1.txt
  echo "== $1"; grep -v "^step" $O/call${N}_$1.txt | grep "^| [dtc]\|rc=\|^- " | cut -c1-300
  { echo; echo "## iterations (bench/gpu/iterations_table.py)"; python3 bench/gpu/iterations_table.py $O/call${N}_$1.json 2>&1; } >> $O/call${N}_$1.txt
  tar czf $OUT/call${N}.tgz -C /tmp call$N logs 2>/dev/null
}
run hf-gpt2-stream hf-gpt2 compile,tierpack+compile,tierpack+compile-0.5 60 330 step:stream,limit:hard
run resnet50 resnet50 compile,compile-0.5,tierpack+compile-0.5 60 200
grep -h "plan from\|allocator held\|runs .* a step\|compiled" /tmp/logs/*/*tierpack*.log | cut -c1-200 | tail -30
