#!/bin/bash
# Session 37, device call 1 (commit COMMIT1: the tree after issue 24's four merges, never run on the H200): the three
# GPU test suites and the storage mover's CUDA tests; HF GPT-2 large at 100% of the default peak again
# (gpu_autocast_cache:auto, the default since a1dc149); HF GPT-2 large and the Llama-style decoder at 75% with one
# more step's allocator history, read by bench/gpu/fragmentation.py (what PyTorch's allocator holds beyond live
# bytes under a plan, and which blocks made the holes). One run per row.
set -o pipefail
export PYTHONUNBUFFERED=1 TIERPACK_CUDA_LIB=$PWD/.devcarry/lib/libtierpack_cuda.so
D=bench/results/gpu-h200-2026-12-11-1
N=1
O=/tmp/call$N; rm -rf $O /tmp/logs; mkdir -p $O /tmp/snap
{ echo "commit $(cat $D/COMMIT$N)"; nvidia-smi --query-gpu=name,driver_version,pcie.link.gen.max,pcie.link.width.max --format=csv,noheader; python3 -c 'import torch, transformers;print("torch",torch.__version__, "transformers", transformers.__version__)'; } > $O/env$N.txt
{ PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True timeout 60 python3 bench/gpu/mempool_probe.py; echo "rc=$?"; } > $O/call${N}_mempool.txt 2>&1
cat $O/call${N}_mempool.txt; tar czf $OUT/call${N}.tgz -C /tmp call$N
for t in gpu_alloc_tests gpu_migrate_tests gpu_runtime_tests; do
  { echo "== $t"; timeout 100 .devcarry/tests/$t 2>&1 | grep -E "^\[  (PASSED|FAILED|SKIPPED) |^\[==========\]|FAILED|Failure" | tail -14; echo "rc=${PIPESTATUS[0]}"; } > $O/call${N}_$t.txt
  cat $O/call${N}_$t.txt
done
{ timeout 220 python3 tests/integrations/python/storage_mover_cuda_test.py -v 2>&1; echo "rc=$?"; } > $O/call${N}_cuda_test.txt
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
frag() {  # the allocator's history of each snapshot
  for s in /tmp/snap/$1*.pickle; do
    { echo "== $s"; timeout 60 python3 bench/gpu/fragmentation.py $s --top 10; } >> $O/call${N}_fragmentation.txt 2>&1
  done
  tail -40 $O/call${N}_fragmentation.txt
  tar czf $OUT/call${N}.tgz -C /tmp call$N logs 2>/dev/null
}
run hf-gpt2 hf-gpt2 default,tierpack "100,75" 200 18 "--snapshot /tmp/snap/s"
frag s.hf-gpt2
run llama llama tierpack 75 80 18 "--snapshot /tmp/snap/s"
frag s.llama
grep -h "autocast\|plan from\|allocator held" /tmp/logs/*/*tierpack*.log | cut -c1-230 | tail -14
