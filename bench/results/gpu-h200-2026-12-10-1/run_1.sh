#!/bin/bash
# Session 36, device call 1 (commit COMMIT1): (1) the three GPU test suites (gpu_alloc_tests, gpu_migrate_tests,
# gpu_runtime_tests: first H200 run since the VMM planner moved to placer/vmm_plan) and the storage mover's CUDA
# tests; (2) the Llama-style decoder's torch.compile rows of issue 22 (compile with activation memory budget 0.5 and
# 0.1, compile without a budget, tierpack under compile at 60% of compile's peak) and tierpack at 100% of the default
# peak. One run per row.
set -o pipefail
export PYTHONUNBUFFERED=1 TIERPACK_CUDA_LIB=$PWD/.devcarry/lib/libtierpack_cuda.so
D=bench/results/gpu-h200-2026-12-10-1
N=1
O=/tmp/call$N; rm -rf $O /tmp/logs; mkdir -p $O
{ echo "commit $(cat $D/COMMIT$N)"; nvidia-smi --query-gpu=name,driver_version,pcie.link.gen.max,pcie.link.width.max --format=csv,noheader; python3 -c 'import torch, transformers;print("torch",torch.__version__, "transformers", transformers.__version__)'; } > $O/env$N.txt
for t in gpu_alloc_tests gpu_migrate_tests gpu_runtime_tests; do
  { echo "== $t"; timeout 120 .devcarry/tests/$t 2>&1 | grep -E "^\[  (PASSED|FAILED|SKIPPED) |^\[==========\]|FAILED|Failure" | tail -14; echo "rc=${PIPESTATUS[0]}"; } > $O/call${N}_$t.txt
  cat $O/call${N}_$t.txt
done
{ timeout 170 python3 tests/integrations/python/storage_mover_cuda_test.py -v 2>&1; echo "rc=$?"; } > $O/call${N}_cuda_test.txt
tail -12 $O/call${N}_cuda_test.txt
tar czf $OUT/call${N}.tgz -C /tmp call$N
run() {  # name model modes budgets timeout warm-up [more options]
  timeout $5 python3 bench/gpu/models_bench.py --lib $TIERPACK_CUDA_LIB --steps 4 --warmup 3 --tierpack-warmup $6 --child-timeout 150 \
    --commit $(cat $D/COMMIT$N) --logs /tmp/logs/$1 --models $2 --modes $3 --budgets "$4" --compile-budgets 60 $7 \
    --json $O/call${N}_$1.json > $O/call${N}_$1.txt 2>&1
  echo "rc=$?" >> $O/call${N}_$1.txt
  grep -v "^step" $O/call${N}_$1.txt | grep "^| [dtc]\|rc=\|^- " | cut -c1-330
  { echo; echo "## iterations (bench/gpu/iterations_table.py)"; python3 bench/gpu/iterations_table.py $O/call${N}_$1.json 2>&1; } >> $O/call${N}_$1.txt
  tar czf $OUT/call${N}.tgz -C /tmp call$N logs 2>/dev/null
}
run llama llama default,compile-0.5,compile-0.1,compile,tierpack+compile,tierpack 100 390 18
grep -h "Measured plans\|DOES NOT\|Error\|compile" /tmp/logs/*/*tierpack*.log | cut -c1-230 | tail -30
