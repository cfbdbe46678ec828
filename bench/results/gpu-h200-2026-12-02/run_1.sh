#!/bin/bash
# Session 25, device call 1. Issue 25: the whole of tierpack built on the GPU machine against its torch 2.11
# (scripts/gpu-machine-build.sh, deps carried from Debian), pip-installed into its Python; a Hugging Face model
# end to end under `tierpack run --gpu-budget 60%`, the report of that run; torch.OutOfMemoryError on a budget too
# small (limit:hard, and the vmm mechanism's shim). Issue 26: compute-sanitizer memcheck of the storage mover's CUDA
# test (in the background, from the library built on Debian). Issue 22: what the allocator holds at the
# out-of-memory error of the Llama-style decoder under limit:hard, fill 0.92.
set -o pipefail
export PYTHONUNBUFFERED=1
R=$PWD; D=bench/results/gpu-h200-2026-12-02
{ echo "commit $(cat $D/COMMIT)"; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
  python3 -c 'import torch, transformers, setuptools; print("torch", torch.__version__, "transformers", transformers.__version__, "setuptools", setuptools.__version__)'
  command -v python3 compute-sanitizer; nproc; } > $OUT/env1.txt 2>&1
# issue 26: memcheck, in the background (GPU memory is ample; nothing below is timed)
SAN=$(command -v compute-sanitizer || ls /usr/local/cuda/bin/compute-sanitizer)
( echo "command: TIERPACK_CUDA_LIB=.devcarry/lib/libtierpack_cuda.so compute-sanitizer --tool memcheck --target-processes all --error-exitcode 9 python3 tests/integrations/python/storage_mover_cuda_test.py -v -k 70_percent -k under_checkpointing"
  TIERPACK_CUDA_LIB=$R/.devcarry/lib/libtierpack_cuda.so timeout 420 $SAN --tool memcheck --target-processes all --error-exitcode 9 \
    python3 tests/integrations/python/storage_mover_cuda_test.py -v -k 70_percent -k under_checkpointing 2>&1 | grep -v "^ *$" | tail -60
  echo "rc=${PIPESTATUS[0]}" ) > $OUT/sanitizer.txt 2>&1 &
SANPID=$!
# issue 25: build on this machine
echo "command: scripts/gpu-machine-build.sh build --deps .devcarry/deps.tar.gz --build-dir /tmp/bg" > $OUT/build.txt
( time timeout 330 scripts/gpu-machine-build.sh build --deps .devcarry/deps.tar.gz --build-dir /tmp/bg ) >> $OUT/build.txt 2>&1
echo "rc=$?" >> $OUT/build.txt
mkdir -p /tmp/e2e && cd /tmp/e2e
{ echo "== which: $(command -v tierpack)"; tierpack --version; python3 -c 'import tierpack; print("tierpack.__version__", tierpack.__version__)'
  echo "== tierpack run --gpu-budget 60% -o run.tpk --stats s.json -- python3 examples/train_hf.py"
  timeout 150 tierpack run --gpu-budget 60% -o run.tpk --stats s.json -- python3 $R/examples/train_hf.py; echo "exit status $?"
  echo "== tierpack report run.tpk --plan run.plan.json --run-stats s.json -o report/"
  timeout 60 tierpack report run.tpk --plan run.plan.json --run-stats s.json -o report/; echo "exit status $?"
  echo "== TIERPACK_GPU=limit:hard tierpack run --gpu-budget 25% --stats oom.json -- python3 examples/train_hf.py --steps 8"
  TIERPACK_GPU=limit:hard timeout 120 tierpack run --gpu-budget 25% --stats oom.json -- python3 $R/examples/train_hf.py --steps 8; echo "exit status $?"
  printf 'import torch\ntry:\n    x = torch.empty(3 << 30, dtype=torch.uint8, device="cuda")\n    print("no error")\nexcept torch.OutOfMemoryError as e:\n    print("caught", type(e).__module__ + "." + type(e).__name__, "|", str(e)[:400])\n    y = torch.ones(1 << 30, dtype=torch.uint8, device="cuda"); print("then 1 GiB allocated:", int(y.sum()) == 1 << 30)\n' > oom_vmm.py
  echo "== TIERPACK_GPU=mechanism:vmm,spill:off tierpack run --gpu-budget 2G -- python3 oom_vmm.py"
  TIERPACK_GPU=mechanism:vmm,spill:off timeout 60 tierpack run --gpu-budget 2G -- python3 oom_vmm.py; echo "exit status $?"
} > e2e.txt 2>&1
cp $R/examples/train_hf.py . ; tar czf $OUT/e2e.tgz -C /tmp e2e
cd $R
# issue 22: the allocator's state at the hard limit's out-of-memory error
LIB=$(python3 -c 'import tierpack._libs as l; print(l.installed_library("libtierpack_cuda.so"))' 2>/dev/null || echo /tmp/bg/install/lib/libtierpack_cuda.so)
[ -f "$LIB" ] || LIB=/tmp/bg/install/lib/libtierpack_cuda.so
echo "lib $LIB; command: python3 bench/gpu/models_bench.py --steps 2 --warmup 2 --tierpack-warmup 8 --child-timeout 100 --models llama --modes default,tierpack --budgets 75 --gpu-options limit:hard,fill:0.92" > $OUT/llama_oom.txt
timeout 200 python3 bench/gpu/models_bench.py --lib $LIB --steps 2 --warmup 2 --tierpack-warmup 8 --child-timeout 100 --commit $(cat $D/COMMIT) \
  --logs /tmp/llogs --models llama --modes default,tierpack --budgets 75 --gpu-options limit:hard,fill:0.92 --json $OUT/llama_oom.json >> $OUT/llama_oom.txt 2>&1
grep -h "out of memory\|plan from\|DOES NOT" /tmp/llogs/*.log >> $OUT/llama_oom.txt 2>/dev/null
tar czf $OUT/llama_logs.tgz -C /tmp llogs 2>/dev/null
wait $SANPID
tail -5 $OUT/build.txt; grep -c . /tmp/e2e/e2e.txt; tail -25 /tmp/e2e/e2e.txt; tail -8 $OUT/llama_oom.txt; tail -12 $OUT/sanitizer.txt
