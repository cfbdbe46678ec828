#!/bin/bash
# Session 35, device call 2 (commit COMMIT2): the storage mover's CUDA tests (first H200 run of raw copies giving the
# caller's context back and of the one-storage calls through the batch paths, and of Note [Measured plans]); the
# T5-style model at 75% again (going back now takes the trial's costs out of later plans); the Llama-style decoder and
# HF GPT-2 large at 60% of checkpointing's peak with step:stream,limit:hard (under the default options no plan fit
# there: call 1); ResNet-50 at 75% of the default peak and at checkpointing's peak. One run per row.
set -o pipefail
export PYTHONUNBUFFERED=1 TIERPACK_CUDA_LIB=$PWD/.devcarry/lib/libtierpack_cuda.so
D=bench/results/gpu-h200-2026-12-09-1
N=2
O=/tmp/call$N; rm -rf $O /tmp/logs; mkdir -p $O
{ echo "commit $(cat $D/COMMIT$N)"; nvidia-smi --query-gpu=name,driver_version,pcie.link.gen.max,pcie.link.width.max --format=csv,noheader; python3 -c 'import torch, transformers;print("torch",torch.__version__, "transformers", transformers.__version__)'; } > $O/env$N.txt
{ timeout 170 python3 tests/integrations/python/storage_mover_cuda_test.py -v 2>&1; echo "rc=$?"; } > $O/call${N}_cuda_test.txt
tail -12 $O/call${N}_cuda_test.txt
tar czf $OUT/call${N}.tgz -C /tmp call$N
run() {  # name model modes budgets at-ckpt timeout warm-up [more options]
  timeout $6 python3 bench/gpu/models_bench.py --lib $TIERPACK_CUDA_LIB --steps 4 --warmup 3 --tierpack-warmup $7 --child-timeout 110 \
    --commit $(cat $D/COMMIT$N) --logs /tmp/logs/$1 --models $2 --modes $3 --budgets "$4" ${5:+--at-ckpt-budgets $5} $8 \
    --json $O/call${N}_$1.json > $O/call${N}_$1.txt 2>&1
  echo "rc=$?" >> $O/call${N}_$1.txt
  grep -v "^step" $O/call${N}_$1.txt | grep "^| [dtc]\|rc=\|^- " | cut -c1-330
  { echo; echo "## iterations (bench/gpu/iterations_table.py)"; python3 bench/gpu/iterations_table.py $O/call${N}_$1.json 2>&1; } >> $O/call${N}_$1.txt
  tar czf $OUT/call${N}.tgz -C /tmp call$N logs 2>/dev/null
}
run t5 t5 default,tierpack 75 "" 110 24
run llama60 llama default,ckpt,tierpack "" 60 90 18 "--gpu-options step:stream,limit:hard"
run resnet50 resnet50 default,ckpt,tierpack 75 100 120 18
run hf-gpt2-60 hf-gpt2 default,ckpt,tierpack "" 60 90 18 "--gpu-options step:stream,limit:hard"
grep -h "Measured plans\|host's time\|DOES NOT\|Error" /tmp/logs/*/*tierpack*.log | cut -c1-230 | tail -30
