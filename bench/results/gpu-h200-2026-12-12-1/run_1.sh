#!/bin/bash
# Session 38, device call 1 (commit COMMIT1, main as session 37 left it): the soft and the hard limit side by side
# at 75% of the default peak on all four bench models (issue 22's <= 1.10x target; Note [Reserved memory]: the soft
# limit's replans for the allocator's holes against limit:hard, whose allocator gives cached pages back at the
# limit), the default beside them in the same call; the Llama-style decoder's soft cell with one more step under
# cProfile (where the hooks' host time goes). One run per row.
set -o pipefail
export PYTHONUNBUFFERED=1 TIERPACK_CUDA_LIB=$PWD/.devcarry/lib/libtierpack_cuda.so
D=bench/results/gpu-h200-2026-12-12-1
N=1
O=/tmp/call$N; rm -rf $O /tmp/logs; mkdir -p $O
{ echo "commit $(cat $D/COMMIT$N)"; nvidia-smi --query-gpu=name,driver_version,pcie.link.gen.max,pcie.link.width.max --format=csv,noheader; python3 -c 'import torch, transformers;print("torch",torch.__version__, "transformers", transformers.__version__)'; nproc; } > $O/env$N.txt
cat $O/env$N.txt
run() {  # name model modes budgets timeout [more options]
  timeout $5 python3 bench/gpu/models_bench.py --lib $TIERPACK_CUDA_LIB --steps 4 --warmup 3 --tierpack-warmup 18 \
    --child-timeout 150 --commit $(cat $D/COMMIT$N) --logs /tmp/logs/$1 --models $2 --modes $3 --budgets "$4" $6 \
    --json $O/call${N}_$1.json > $O/call${N}_$1.txt 2>&1
  echo "rc=$?" >> $O/call${N}_$1.txt
  echo "== $1"; grep -v "^step" $O/call${N}_$1.txt | grep "^| [dtc]\|rc=\|^- \|^  " | cut -c1-300
  { echo; echo "## iterations (bench/gpu/iterations_table.py)"; python3 bench/gpu/iterations_table.py $O/call${N}_$1.json 2>&1; } >> $O/call${N}_$1.txt
  tar czf $OUT/call${N}.tgz -C /tmp call$N logs 2>/dev/null
}
run llama-soft llama default,tierpack 75 110 "--profile python"
run llama-hard llama tierpack 75 70 "--gpu-options limit:hard"
run resnet50-soft resnet50 default,tierpack 75 70
run resnet50-hard resnet50 tierpack 75 50 "--gpu-options limit:hard"
run hf-gpt2-soft hf-gpt2 default,tierpack 75 110
run hf-gpt2-hard hf-gpt2 tierpack 75 80 "--gpu-options limit:hard"
run t5-soft t5 default,tierpack 75 130
run t5-hard t5 tierpack 75 90 "--gpu-options limit:hard"
grep -h "plan from\|allocator held\|out of memory\|runs .* a step" /tmp/logs/*/*tierpack*.log | cut -c1-240 | tail -30
