#!/bin/bash
# Session 37, device call 2 (commit COMMIT2: the recorded iteration counts a storage let go but still held once).
# Call 1 ran the Llama-style decoder at 75% of its default peak in 247.4 ms (session 35: 176.1 ms, the same plan's
# bytes) with the hooks' host time 64-94 ms a step against 40-43: an A/B on one machine tells the code from the
# machine. The tree of session 35's call 1 (0939bef: python/, bench/gpu/ and its libtierpack_cuda.so, carried in
# .devcarry/old) and this tree, one after the other; HF GPT-2 large at 100% and 75%
# with this tree; the storage mover's torch.compile test, which call 1's time limit cut. One run per row.
set -o pipefail
export PYTHONUNBUFFERED=1
LIB=$PWD/.devcarry/lib/libtierpack_cuda.so
D=bench/results/gpu-h200-2026-12-11-1
N=2
O=/tmp/call$N; rm -rf $O /tmp/logs; mkdir -p $O
{ echo "commit $(cat $D/COMMIT$N)"; nvidia-smi --query-gpu=name,driver_version,pcie.link.gen.max,pcie.link.width.max --format=csv,noheader; python3 -c 'import torch, transformers;print("torch",torch.__version__, "transformers", transformers.__version__)'; nproc; grep -m1 "model name" /proc/cpuinfo; } > $O/env$N.txt
run() {  # name harness-root lib model modes budgets timeout [more options]
  TIERPACK_CUDA_LIB=$3 timeout $7 python3 $2/bench/gpu/models_bench.py --lib $3 --steps 4 --warmup 3 --tierpack-warmup 18 \
    --child-timeout 100 --commit "$(cat $D/COMMIT$N)" --logs /tmp/logs/$1 --models $4 --modes $5 --budgets "$6" $8 \
    --json $O/call${N}_$1.json > $O/call${N}_$1.txt 2>&1
  echo "rc=$?" >> $O/call${N}_$1.txt
  echo "== $1"; grep -v "^step" $O/call${N}_$1.txt | grep "^| [dtc]\|rc=\|^- " | cut -c1-300
  { echo; echo "## iterations (bench/gpu/iterations_table.py)"; python3 bench/gpu/iterations_table.py $O/call${N}_$1.json 2>&1; } >> $O/call${N}_$1.txt
  tar czf $OUT/call${N}.tgz -C /tmp call$N logs 2>/dev/null
}
run llama-old .devcarry/old .devcarry/old/lib/libtierpack_cuda.so llama default,tierpack 75 110
run llama-new . $LIB llama default,tierpack 75 110
run hf-gpt2 . $LIB hf-gpt2 default,tierpack "100,75" 200
{ TIERPACK_CUDA_LIB=$LIB timeout 150 python3 tests/integrations/python/storage_mover_cuda_test.py -v \
    StorageMoverCudaTest.test_under_torch_compile_offloads_only_bit_identical 2>&1; echo "rc=$?"; } > $O/call${N}_cuda_test.txt
grep -E "^test_|^Ran|^OK|FAILED|rc=" $O/call${N}_cuda_test.txt | cut -c1-200
tar czf $OUT/call${N}.tgz -C /tmp call$N logs 2>/dev/null
grep -h "plan from\|allocator held\|runs .* a step" /tmp/logs/*/*tierpack*.log | cut -c1-200 | tail -16
