#!/bin/bash
# Session 36, device call 2 (commit COMMIT2, the same as call 1): ResNet-50 and Hugging Face GPT-2 large, issue 22's
# torch.compile rows (compile with activation memory budget 0.5 and 0.1, compile without a budget, tierpack under
# compile at 60% of compile's peak) and tierpack at 100% of the default peak, as call 1 ran them for the Llama-style
# decoder (HF GPT-2 without compile-0.1: device time). One run per row.
set -o pipefail
export PYTHONUNBUFFERED=1 TIERPACK_CUDA_LIB=$PWD/.devcarry/lib/libtierpack_cuda.so
D=bench/results/gpu-h200-2026-12-10-1
N=2
O=/tmp/call$N; rm -rf $O /tmp/logs; mkdir -p $O
{ echo "commit $(cat $D/COMMIT$N)"; nvidia-smi --query-gpu=name,driver_version,pcie.link.gen.max,pcie.link.width.max --format=csv,noheader; python3 -c 'import torch, transformers;print("torch",torch.__version__, "transformers", transformers.__version__)'; } > $O/env$N.txt
run() {  # name model modes budgets timeout warm-up [more options]
  timeout $5 python3 bench/gpu/models_bench.py --lib $TIERPACK_CUDA_LIB --steps 4 --warmup 3 --tierpack-warmup $6 --child-timeout 150 \
    --commit $(cat $D/COMMIT$N) --logs /tmp/logs/$1 --models $2 --modes $3 --budgets "$4" --compile-budgets 60 $7 \
    --json $O/call${N}_$1.json > $O/call${N}_$1.txt 2>&1
  echo "rc=$?" >> $O/call${N}_$1.txt
  grep -v "^step" $O/call${N}_$1.txt | grep "^| [dtc]\|rc=\|^- " | cut -c1-330
  { echo; echo "## iterations (bench/gpu/iterations_table.py)"; python3 bench/gpu/iterations_table.py $O/call${N}_$1.json 2>&1; } >> $O/call${N}_$1.txt
  tar czf $OUT/call${N}.tgz -C /tmp call$N logs 2>/dev/null
}
run resnet50 resnet50 default,compile-0.5,compile-0.1,compile,tierpack+compile,tierpack 100 250 18
run hf-gpt2 hf-gpt2 default,compile-0.5,compile,tierpack+compile,tierpack 100 300 18
grep -h "Measured plans\|DOES NOT\|Error\|compile" /tmp/logs/*/*tierpack*.log | cut -c1-230 | tail -30
