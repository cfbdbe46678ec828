#!/bin/bash
# Session 37, device call 3 (commit COMMIT3: Note [Holds] — plans made first from the trace less the module calls'
# holds — and the recorded iteration's count of storages let go but still held): the storage mover's CUDA tests;
# HF GPT-2 large at 100% and 75% of its default peak and the Llama-style decoder at 100% again. One run per row.
set -o pipefail
export PYTHONUNBUFFERED=1 TIERPACK_CUDA_LIB=$PWD/.devcarry/lib/libtierpack_cuda.so
D=bench/results/gpu-h200-2026-12-11-1
N=3
O=/tmp/call$N; rm -rf $O /tmp/logs; mkdir -p $O
{ echo "commit $(cat $D/COMMIT$N)"; nvidia-smi --query-gpu=name,driver_version,pcie.link.gen.max,pcie.link.width.max --format=csv,noheader; python3 -c 'import torch, transformers;print("torch",torch.__version__, "transformers", transformers.__version__)'; } > $O/env$N.txt
run() {  # name model modes budgets timeout
  timeout $5 python3 bench/gpu/models_bench.py --lib $TIERPACK_CUDA_LIB --steps 4 --warmup 3 --tierpack-warmup 18 \
    --child-timeout 100 --commit $(cat $D/COMMIT$N) --logs /tmp/logs/$1 --models $2 --modes $3 --budgets "$4" \
    --json $O/call${N}_$1.json > $O/call${N}_$1.txt 2>&1
  echo "rc=$?" >> $O/call${N}_$1.txt
  echo "== $1"; grep -v "^step" $O/call${N}_$1.txt | grep "^| [dtc]\|rc=\|^- " | cut -c1-300
  { echo; echo "## iterations (bench/gpu/iterations_table.py)"; python3 bench/gpu/iterations_table.py $O/call${N}_$1.json 2>&1; } >> $O/call${N}_$1.txt
  tar czf $OUT/call${N}.tgz -C /tmp call$N logs 2>/dev/null
}
run hf-gpt2 hf-gpt2 default,tierpack "100,75" 200
run llama llama default,tierpack 100 90
grep -h "plan from\|allocator held\|runs .* a step" /tmp/logs/*/*tierpack*.log | cut -c1-220 | tail -12
{ timeout 250 python3 tests/integrations/python/storage_mover_cuda_test.py -v 2>&1; echo "rc=$?"; } > $O/call${N}_cuda_test.txt
grep -E "^test_|^Ran|^OK|FAILED|rc=" $O/call${N}_cuda_test.txt | cut -c1-200
tar czf $OUT/call${N}.tgz -C /tmp call$N logs 2>/dev/null
