#!/bin/bash
# Session 35, device call 3 (commit COMMIT3): Note [Measured plans] with costs waiting for two measured steps of the
# plan in force (call 2's Llama trial compared against one lucky step). The T5-style model at 75% (default options,
# 24 warm-up steps); the Llama-style decoder at 60% of checkpointing's peak and HF GPT-2 large at 100% and 60% of it,
# with step:stream,limit:hard (no plan fits 60% with the whole step: call 1). One run per row.
set -o pipefail
export PYTHONUNBUFFERED=1 TIERPACK_CUDA_LIB=$PWD/.devcarry/lib/libtierpack_cuda.so
D=bench/results/gpu-h200-2026-12-09-1
N=3
O=/tmp/call$N; rm -rf $O /tmp/logs; mkdir -p $O
{ echo "commit $(cat $D/COMMIT$N)"; nvidia-smi --query-gpu=name,driver_version,pcie.link.gen.max,pcie.link.width.max --format=csv,noheader; python3 -c 'import torch, transformers;print("torch",torch.__version__, "transformers", transformers.__version__)'; } > $O/env$N.txt
run() {  # name model modes budgets at-ckpt timeout warm-up [more options]
  timeout $6 python3 bench/gpu/models_bench.py --lib $TIERPACK_CUDA_LIB --steps 4 --warmup 3 --tierpack-warmup $7 --child-timeout 110 \
    --commit $(cat $D/COMMIT$N) --logs /tmp/logs/$1 --models $2 --modes $3 --budgets "$4" ${5:+--at-ckpt-budgets $5} $8 \
    --json $O/call${N}_$1.json > $O/call${N}_$1.txt 2>&1
  echo "rc=$?" >> $O/call${N}_$1.txt
  grep -v "^step" $O/call${N}_$1.txt | grep "^| [dtc]\|rc=\|^- " | cut -c1-330
  { echo; echo "## iterations (bench/gpu/iterations_table.py)"; python3 bench/gpu/iterations_table.py $O/call${N}_$1.json 2>&1; } >> $O/call${N}_$1.txt
  tar czf $OUT/call${N}.tgz -C /tmp call$N logs 2>/dev/null
}
run t5 t5 default,tierpack 75 "" 120 24
run llama60 llama default,ckpt,tierpack "" 60 100 20 "--gpu-options step:stream,limit:hard"
run hf-gpt2-ckpt hf-gpt2 default,ckpt,tierpack "" 100,60 200 20 "--gpu-options step:stream,limit:hard"
grep -h "Measured plans\|DOES NOT\|Error" /tmp/logs/*/*tierpack*.log | cut -c1-230 | tail -30
