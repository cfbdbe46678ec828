#!/bin/bash
# Session 34, device call 3 (commit COMMIT3, the runtime of calls 1-2): the T5-style model at 75% of the default peak
# with recompute:off and limit:hard (copies only: 14.2 GB each way, ~2500 copies issued a step in call 2), copies:torch
# and copies:raw side by side (one bench run each, in this order). Everything under /tmp/call3 goes back as call3.tgz. First StorageCopies' tests (twin and CUDA) under compute-sanitizer memcheck.
set -o pipefail
export PYTHONUNBUFFERED=1 TIERPACK_CUDA_LIB=$PWD/.devcarry/lib/libtierpack_cuda.so
D=bench/results/gpu-h200-2026-12-08-1
N=3
O=/tmp/call$N; rm -rf $O /tmp/logs; mkdir -p $O
{ echo "commit $(cat $D/COMMIT$N)"; nvidia-smi --query-gpu=name,driver_version,pcie.link.gen.max,pcie.link.width.max --format=csv,noheader; python3 -c 'import torch, transformers;print("torch",torch.__version__, "transformers", transformers.__version__)'; } > $O/env$N.txt
SAN=$(command -v compute-sanitizer || ls /usr/local/cuda/bin/compute-sanitizer)
{ echo "== $SAN --tool memcheck --error-exitcode 9 gpu_migrate_tests --gtest_filter='StorageCopies*'"
  timeout 60 $SAN --tool memcheck --error-exitcode 9 .devcarry/tests/gpu_migrate_tests --gtest_filter='StorageCopies*' 2>&1 | tail -8; echo "rc=${PIPESTATUS[0]}"
} > $O/call${N}_memcheck_storage_copies.txt 2>&1
cat $O/call${N}_memcheck_storage_copies.txt
run() {  # name model modes budgets timeout [more options]
  timeout $5 python3 bench/gpu/models_bench.py --lib $TIERPACK_CUDA_LIB --steps 4 --warmup 3 --tierpack-warmup 14 --child-timeout 110 \
    --commit $(cat $D/COMMIT$N) --logs /tmp/logs/$1 --models $2 --modes $3 --budgets "$4" $6 \
    --json $O/call${N}_$1.json > $O/call${N}_$1.txt 2>&1
  echo "rc=$?" >> $O/call${N}_$1.txt
  grep -v "^step" $O/call${N}_$1.txt | grep "^| [dt]\|rc=\|^- " | cut -c1-400
  { echo; echo "## iterations (bench/gpu/iterations_table.py)"; python3 bench/gpu/iterations_table.py $O/call${N}_$1.json 2>&1; } >> $O/call${N}_$1.txt
  tar czf $OUT/call${N}.tgz -C /tmp call$N logs 2>/dev/null
}
run t5_copies_torch t5 tierpack 75 110 "--gpu-options recompute:off,limit:hard,copies:torch"
run t5_copies_raw t5 tierpack 75 110 "--gpu-options recompute:off,limit:hard,copies:raw"
grep -h "host's time" /tmp/logs/*/*tierpack*.log | cut -c1-220
