#!/bin/bash
# Session 35, device call 1 (commit COMMIT1): Note [Measured plans] (a plan made for a measured cost is on trial and
# gives way to the plan it replaced when it runs longer). Default options, one run per row: the T5-style model at 75%
# of the default peak (22 warm-up steps: its cost replans and their trials come before the timed steps); HF GPT-2
# large and the Llama-style decoder at 75% of the default peak and at 100% / 60% of full checkpointing's peak (issue
# 23's rows), beside default and ckpt. Everything under /tmp/call1 goes back as call1.tgz.
set -o pipefail
export PYTHONUNBUFFERED=1 TIERPACK_CUDA_LIB=$PWD/.devcarry/lib/libtierpack_cuda.so
D=bench/results/gpu-h200-2026-12-09-1
N=1
O=/tmp/call$N; rm -rf $O /tmp/logs; mkdir -p $O
{ echo "commit $(cat $D/COMMIT$N)"; nvidia-smi --query-gpu=name,driver_version,pcie.link.gen.max,pcie.link.width.max --format=csv,noheader; python3 -c 'import torch, transformers;print("torch",torch.__version__, "transformers", transformers.__version__)'; } > $O/env$N.txt
cat $O/env$N.txt
run() {  # name model modes budgets at-ckpt timeout warm-up
  timeout $6 python3 bench/gpu/models_bench.py --lib $TIERPACK_CUDA_LIB --steps 4 --warmup 3 --tierpack-warmup $7 --child-timeout 110 \
    --commit $(cat $D/COMMIT$N) --logs /tmp/logs/$1 --models $2 --modes $3 --budgets "$4" ${5:+--at-ckpt-budgets $5} \
    --json $O/call${N}_$1.json > $O/call${N}_$1.txt 2>&1
  echo "rc=$?" >> $O/call${N}_$1.txt
  grep -v "^step" $O/call${N}_$1.txt | grep "^| [dtc]\|rc=\|^- " | cut -c1-330
  { echo; echo "## iterations (bench/gpu/iterations_table.py)"; python3 bench/gpu/iterations_table.py $O/call${N}_$1.json 2>&1; } >> $O/call${N}_$1.txt
  tar czf $OUT/call${N}.tgz -C /tmp call$N logs 2>/dev/null
}
run t5 t5 default,tierpack 75 "" 120 22
run hf-gpt2 hf-gpt2 default,ckpt,tierpack 75 100,60 230 18
run llama llama default,ckpt,tierpack 75 100,60 200 18
grep -h "Measured plans\|host's time\|plan from" /tmp/logs/*/*tierpack*.log | cut -c1-230 | tail -40
