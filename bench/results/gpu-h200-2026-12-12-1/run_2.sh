#!/bin/bash
# Session 38, device call 2 (commit COMMIT2: the soft limit never rises back to a limit found over, Note [Reserved
# memory]): an A/B on one machine at 75% of the default peak, this tree's Python against main's before it (aeb632b,
# its bench/gpu and python/ carried in .devcarry/old; the same libtierpack_cuda.so: no C++ changed), HF GPT-2 large
# and the Llama-style decoder, the default beside them; then the T5-style model with this tree. One run per row.
set -o pipefail
export PYTHONUNBUFFERED=1 TIERPACK_CUDA_LIB=$PWD/.devcarry/lib/libtierpack_cuda.so
D=bench/results/gpu-h200-2026-12-12-1
N=2
O=/tmp/call$N; rm -rf $O /tmp/logs; mkdir -p $O
{ echo "commit $(cat $D/COMMIT$N)"; nvidia-smi --query-gpu=name,driver_version,pcie.link.gen.max,pcie.link.width.max --format=csv,noheader; python3 -c 'import torch, transformers;print("torch",torch.__version__, "transformers", transformers.__version__)'; } > $O/env$N.txt
cat $O/env$N.txt
run() {  # name tree model modes budgets timeout
  timeout $6 python3 $2/bench/gpu/models_bench.py --lib $TIERPACK_CUDA_LIB --steps 4 --warmup 3 --tierpack-warmup 18 \
    --child-timeout 150 --commit $(cat $D/COMMIT$N) --logs /tmp/logs/$1 --models $3 --modes $4 --budgets "$5" \
    --json $O/call${N}_$1.json > $O/call${N}_$1.txt 2>&1
  echo "rc=$?" >> $O/call${N}_$1.txt
  echo "== $1"; grep -v "^step" $O/call${N}_$1.txt | grep "^| [dtc]\|rc=\|^- " | cut -c1-300
  { echo; echo "## iterations (bench/gpu/iterations_table.py)"; python3 bench/gpu/iterations_table.py $O/call${N}_$1.json 2>&1; } >> $O/call${N}_$1.txt
  tar czf $OUT/call${N}.tgz -C /tmp call$N logs 2>/dev/null
}
run hf-gpt2-new . hf-gpt2 default,tierpack 75 110
run hf-gpt2-old .devcarry/old hf-gpt2 tierpack 75 80
run llama-new . llama default,tierpack 75 70
run llama-old .devcarry/old llama tierpack 75 50
run t5-new . t5 default,tierpack 75 130
grep -h "plan from\|allocator held\|runs .* a step" /tmp/logs/*/*tierpack*.log | cut -c1-200 | tail -30
