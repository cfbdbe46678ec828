#!/bin/bash
# Session 36, device call 3 (commit COMMIT3: the restructured tree of issue 24 — runtime/, one settings format and one
# C ABI, the storage mover split by concept — and Note [Under torch.compile]): the three GPU test suites and the
# storage mover's CUDA tests (with the new torch.compile test); ResNet-50 and Hugging Face GPT-2 large with tierpack
# at 100% of the default peak (issue 22: <= 2% slower than the default). One run per row.
set -o pipefail
export PYTHONUNBUFFERED=1 TIERPACK_CUDA_LIB=$PWD/.devcarry/lib/libtierpack_cuda.so
D=bench/results/gpu-h200-2026-12-10-1
N=3
O=/tmp/call$N; rm -rf $O /tmp/logs; mkdir -p $O
{ echo "commit $(cat $D/COMMIT$N)"; nvidia-smi --query-gpu=name,driver_version,pcie.link.gen.max,pcie.link.width.max --format=csv,noheader; python3 -c 'import torch, transformers;print("torch",torch.__version__, "transformers", transformers.__version__)'; } > $O/env$N.txt
for t in gpu_alloc_tests gpu_migrate_tests gpu_runtime_tests; do
  { echo "== $t"; timeout 100 .devcarry/tests/$t 2>&1 | grep -E "^\[  (PASSED|FAILED|SKIPPED) |^\[==========\]|FAILED|Failure" | tail -14; echo "rc=${PIPESTATUS[0]}"; } > $O/call${N}_$t.txt
  cat $O/call${N}_$t.txt
done
{ timeout 200 python3 tests/integrations/python/storage_mover_cuda_test.py -v 2>&1; echo "rc=$?"; } > $O/call${N}_cuda_test.txt
grep -E "^test_|^Ran|^OK|FAILED|rc=" $O/call${N}_cuda_test.txt | cut -c1-200
tar czf $OUT/call${N}.tgz -C /tmp call$N
run() {  # name model modes budgets timeout warm-up [more options]
  timeout $5 python3 bench/gpu/models_bench.py --lib $TIERPACK_CUDA_LIB --steps 4 --warmup 3 --tierpack-warmup $6 --child-timeout 100 \
    --commit $(cat $D/COMMIT$N) --logs /tmp/logs/$1 --models $2 --modes $3 --budgets "$4" $7 \
    --json $O/call${N}_$1.json > $O/call${N}_$1.txt 2>&1
  echo "rc=$?" >> $O/call${N}_$1.txt
  grep -v "^step" $O/call${N}_$1.txt | grep "^| [dtc]\|rc=\|^- " | cut -c1-330
  { echo; echo "## iterations (bench/gpu/iterations_table.py)"; python3 bench/gpu/iterations_table.py $O/call${N}_$1.json 2>&1; } >> $O/call${N}_$1.txt
  tar czf $OUT/call${N}.tgz -C /tmp call$N logs 2>/dev/null
}
run resnet50 resnet50 default,tierpack 100 75 18
run hf-gpt2 hf-gpt2 default,tierpack 100 90 18
grep -h "compile\|plan from" $O/call${N}_cuda_test.txt /tmp/logs/*/*tierpack*.log | grep -v Warning | cut -c1-260 | tail -8
