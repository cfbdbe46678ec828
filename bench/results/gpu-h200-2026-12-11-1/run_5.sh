#!/bin/bash
# Session 37, device call 5 (commit COMMIT5: StorageMover takes its fill, fits_fraction and divergences from the
# settings; Note [Holds]): the T5-style encoder-decoder at 100% of its default peak (issue 22: <= 2% slower than
# the default), then ResNet-50 at 100% if the call's time allows. One run per row.
set -o pipefail
export PYTHONUNBUFFERED=1 TIERPACK_CUDA_LIB=$PWD/.devcarry/lib/libtierpack_cuda.so
D=bench/results/gpu-h200-2026-12-11-1
N=5
O=/tmp/call$N; rm -rf $O /tmp/logs; mkdir -p $O
{ echo "commit $(cat $D/COMMIT$N)"; nvidia-smi --query-gpu=name,driver_version,pcie.link.gen.max,pcie.link.width.max --format=csv,noheader; python3 -c 'import torch, transformers;print("torch",torch.__version__, "transformers", transformers.__version__)'; } > $O/env$N.txt
run() {  # name model modes budgets timeout
  timeout $5 python3 bench/gpu/models_bench.py --lib $TIERPACK_CUDA_LIB --steps 4 --warmup 3 --tierpack-warmup 18 \
    --child-timeout 140 --commit $(cat $D/COMMIT$N) --logs /tmp/logs/$1 --models $2 --modes $3 --budgets "$4" \
    --json $O/call${N}_$1.json > $O/call${N}_$1.txt 2>&1
  echo "rc=$?" >> $O/call${N}_$1.txt
  echo "== $1"; grep -v "^step" $O/call${N}_$1.txt | grep "^| [dtc]\|rc=\|^- " | cut -c1-300
  tar czf $OUT/call${N}.tgz -C /tmp call$N logs 2>/dev/null
}
run t5 t5 default,tierpack 100 170
run resnet50 resnet50 default,tierpack 100 60
grep -h "plan from\|modules run again" /tmp/logs/*/*tierpack*.log | cut -c1-220 | tail -6
