#!/bin/bash
# Session 27, device call 3 (commit COMMIT3; hooks' host cost cut, Note [Storage moves]): the whole of tierpack built
# here (scripts/gpu-machine-build.sh, deps carried) and `tierpack run --gpu-budget 60%` on examples/train_hf.py (the host
# side steps aside: Note [Host side steps aside] in core/config.hpp, not run on a GPU before); then the T5-style
# encoder-decoder and ResNet-50: default, checkpointing, tierpack (limit:soft) at 75% of the default's NVML peak and
# at checkpointing's peak, 14 warm-up steps for tierpack, one more step's allocator history read by fragmentation.py.
export PYTHONUNBUFFERED=1 TIERPACK_CUDA_LIB=$PWD/.devcarry/lib/libtierpack_cuda.so
D=bench/results/gpu-h200-2026-12-02-3; R=$PWD
{ echo "commit $(cat $D/COMMIT3)"; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; python3 -c 'import torch, transformers;print("torch",torch.__version__, "transformers", transformers.__version__)'; } > $OUT/env3.txt
echo "command: scripts/gpu-machine-build.sh build --deps .devcarry/deps.tar.gz --build-dir /tmp/bg" > $OUT/call3_e2e.txt
( time timeout 200 scripts/gpu-machine-build.sh build --deps .devcarry/deps.tar.gz --build-dir /tmp/bg ) > /tmp/build.txt 2>&1
echo "build rc=$?" >> $OUT/call3_e2e.txt; tail -4 /tmp/build.txt >> $OUT/call3_e2e.txt
mkdir -p /tmp/e2e && cd /tmp/e2e
{ echo "== tierpack run --gpu-budget 60% --stats s.json -- python3 examples/train_hf.py"
  timeout 150 tierpack run --gpu-budget 60% --stats s.json -- python3 $R/examples/train_hf.py; echo "exit status $?"
  ls; python3 -c 'import json; d=json.load(open("s.gpu0.json")); print({k: d[k] for k in ("phase", "plan")}); print(d["iterations"][-1]); print(d.get("recomputations", {}).get("measured_ms"), d.get("recomputations", {}).get("predicted_ms"))'
} >> $OUT/call3_e2e.txt 2>&1
cd $R
mkdir -p /tmp/snap
timeout 330 python3 bench/gpu/models_bench.py --lib $TIERPACK_CUDA_LIB --steps 4 --warmup 3 --tierpack-warmup 14 --child-timeout 110 \
  --commit $(cat $D/COMMIT3) --logs /tmp/logs --models t5,resnet50 --modes default,ckpt,tierpack --budgets 75 --at-ckpt-budgets 100 \
  --snapshot /tmp/snap/s --json $OUT/call3_models.json > $OUT/call3_bench.txt 2>&1
echo "rc=$?" >> $OUT/call3_bench.txt
for f in /tmp/snap/*.pickle; do echo "== $f"; python3 bench/gpu/fragmentation.py $f; done > $OUT/call3_fragmentation.txt 2>&1
tar czf $OUT/call3_logs.tgz -C /tmp logs 2>/dev/null
tail -22 $OUT/call3_e2e.txt
grep -v "^step" $OUT/call3_bench.txt | grep "^|\|^#\|rc="
grep -h "modules run again\|plan from\|held\|made .* again in" /tmp/logs/*tierpack* | cut -c1-250 | head -24
cat $OUT/call3_fragmentation.txt | head -40
