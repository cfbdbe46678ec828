#!/bin/bash
# Session 25, device call 4: call 1's end-to-end run again with libjemalloc loaded privately (Note [jemalloc loaded
# privately] in platform/jemalloc.cpp): build on this machine, pip install, a Hugging Face GPT-2 under
# `tierpack run --gpu-budget 60%`, its report, torch.OutOfMemoryError on a budget too small (limit:hard; the vmm
# mechanism's shim). Then the T5-style encoder-decoder and ResNet-50 rows with recompute (issue 23): default,
# checkpointing, tierpack (default settings: limit:soft) at 75% of the default peak and at checkpointing's peak.
set -o pipefail
export PYTHONUNBUFFERED=1
R=$PWD; D=bench/results/gpu-h200-2026-12-02
( time timeout 300 scripts/gpu-machine-build.sh build --deps .devcarry/deps.tar.gz --build-dir /tmp/bg ) > $OUT/build4.txt 2>&1
echo "rc=$?" >> $OUT/build4.txt
readelf -d /tmp/bg/install/lib/libtierpack_torch.so | grep NEEDED >> $OUT/build4.txt
mkdir -p /tmp/e2e && cd /tmp/e2e
printf 'import torch\ntry:\n    x = torch.empty(3 << 30, dtype=torch.uint8, device="cuda")\n    print("no error")\nexcept torch.OutOfMemoryError as e:\n    print("caught", type(e).__module__ + "." + type(e).__name__)\n    y = torch.ones(1 << 30, dtype=torch.uint8, device="cuda"); print("then 1 GiB allocated:", y[-1].item() == 1)\n' > oom_vmm.py
{ echo "== which: $(command -v tierpack)"; tierpack --version; python3 -c 'import tierpack; print("tierpack.__version__", tierpack.__version__)'
  python3 -m tierpack --version
  echo "== tierpack run --gpu-budget 60% -o run.tpk --stats s.json -- python3 examples/train_hf.py"
  timeout 200 tierpack run --gpu-budget 60% -o run.tpk --stats s.json -- python3 $R/examples/train_hf.py; echo "exit status $?"
  echo "== tierpack report run.tpk --plan run.plan.json --run-stats s.json -o report/"
  timeout 60 tierpack report run.tpk --plan run.plan.json --run-stats s.json -o report/; echo "exit status $?"
  echo "== TIERPACK_GPU=limit:hard tierpack run --gpu-budget 25% --stats oom.json -- python3 examples/train_hf.py --steps 8"
  TIERPACK_GPU=limit:hard timeout 120 tierpack run --gpu-budget 25% --stats oom.json -- python3 $R/examples/train_hf.py --steps 8; echo "exit status $?"
  echo "== TIERPACK_GPU=mechanism:vmm,spill:off tierpack run --gpu-budget 2G -- python3 oom_vmm.py"
  TIERPACK_GPU=mechanism:vmm,spill:off timeout 60 tierpack run --gpu-budget 2G -- python3 oom_vmm.py; echo "exit status $?"
} > e2e.txt 2>&1
cp $R/examples/train_hf.py . ; tar czf $OUT/e2e4.tgz -C /tmp e2e
cd $R
LIB=/tmp/bg/install/lib/libtierpack_cuda.so
{ echo "commit $(cat $D/COMMIT4)"; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; python3 -c 'import torch;print("torch",torch.__version__)'; } > $OUT/env4.txt
timeout 345 python3 bench/gpu/models_bench.py --lib $LIB --steps 4 --warmup 2 --tierpack-warmup 8 --child-timeout 110 --commit $(cat $D/COMMIT4) \
  --logs /tmp/logs --models t5,resnet50 --modes default,ckpt,tierpack --budgets 75 --at-ckpt-budgets 100 --json $OUT/call4_models.json 2>&1 | tee $OUT/call4_bench.txt
tar czf $OUT/call4_logs.tgz -C /tmp logs 2>/dev/null
grep -v "^step" /tmp/e2e/e2e.txt | tail -40
