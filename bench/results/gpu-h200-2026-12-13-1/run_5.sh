#!/bin/bash
# Session 40, device call 5 (commit COMMIT5): tierpack under the user's own checkpointing (tierpack+ckpt) at 60% of
# checkpointing's NVML peak, issue 22's target <= 1.3x checkpointing's step, on the models it was not measured on
# with this tree (only GPT-2 in plain torch, gpu-h200-2026-12-01-3: 261.2 against ~200 ms). One run per row; each cell
# under its own time limit, the archive after each; all within CAP seconds (default 570), the cells CELLS names (default all).
set -o pipefail
export PYTHONUNBUFFERED=1 TIERPACK_CUDA_LIB=$PWD/.devcarry/lib/libtierpack_cuda.so
D=bench/results/gpu-h200-2026-12-13-1
N=5
O=/tmp/call$N; rm -rf $O /tmp/logs; mkdir -p $O
{ echo "commit $(cat $D/COMMIT$N)"; nvidia-smi --query-gpu=name,driver_version,pcie.link.gen.max,pcie.link.width.max --format=csv,noheader; python3 -c 'import torch, transformers;print("torch",torch.__version__, "transformers", transformers.__version__)'; nproc; grep -m1 "model name" /proc/cpuinfo; } > $O/env$N.txt
cat $O/env$N.txt
START=$(date +%s)
run() {  # name model modes budgets timeout [gpu-options]; only the cells named in CELLS (default all)
  case " ${CELLS:-$1} " in *" $1 "*) ;; *) echo "== $1: not in CELLS"; return;; esac
  left=$(( ${CAP:-570} - ($(date +%s) - START) ))
  t=$5; [ $left -lt $t ] && t=$left
  [ $t -lt 40 ] && { echo "== $1: skipped, $left s left"; return; }
  timeout $t python3 bench/gpu/models_bench.py --lib $TIERPACK_CUDA_LIB --steps 4 --warmup 3 --tierpack-warmup 18 \
    --child-timeout 200 --commit $(cat $D/COMMIT$N) --logs /tmp/logs/$1 --models $2 --modes $3 --budgets "$4" \
    --compile-budgets 60 --ckpt-budgets 60 ${6:+--gpu-options $6} --json $O/call${N}_$1.json > $O/call${N}_$1.txt 2>&1
  echo "rc=$?" >> $O/call${N}_$1.txt
  echo "== $1"; grep -v "^step" $O/call${N}_$1.txt | grep "^| [dtc]\|rc=\|^- " | cut -c1-300
  { echo; echo "## iterations (bench/gpu/iterations_table.py)"; python3 bench/gpu/iterations_table.py $O/call${N}_$1.json 2>&1; } >> $O/call${N}_$1.txt
  tar czf $OUT/call${N}.tgz -C /tmp call$N logs 2>/dev/null
}
run llama llama ckpt,tierpack+ckpt 60 130
run resnet50 resnet50 ckpt,tierpack+ckpt 60 120
run hf-gpt2 hf-gpt2 ckpt,tierpack+ckpt 60 170
run t5 t5 ckpt,tierpack+ckpt 60 200
grep -h "plan from\|allocator held\|runs .* a step\|compiled" /tmp/logs/*/*tierpack*.log | cut -c1-200 | tail -30
