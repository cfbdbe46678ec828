#!/bin/bash
# Session 25, device call 2: why `tierpack run` crashed the Hugging Face run of call 1 (SIGSEGV / "free(): invalid
# pointer" in the profiled iteration, torch 2.11 + Python 3.12): the same build, then variants that leave one part
# out, each with Python's fault handler, and a cuda-gdb backtrace of the failing command. In the background:
# compute-sanitizer memcheck of the storage mover's CUDA test again, keeping the first errors whole.
set -o pipefail
export PYTHONUNBUFFERED=1 PYTHONFAULTHANDLER=1
R=$PWD; D=bench/results/gpu-h200-2026-12-02
SAN=$(command -v compute-sanitizer || ls /usr/local/cuda/bin/compute-sanitizer)
( TIERPACK_CUDA_LIB=$R/.devcarry/lib/libtierpack_cuda.so timeout 400 $SAN --tool memcheck --print-limit 4 --target-processes all --error-exitcode 9 \
    python3 tests/integrations/python/storage_mover_cuda_test.py -v -k 70_percent > /tmp/san.txt 2>&1; echo "rc=$?" >> /tmp/san.txt
  head -c 60000 /tmp/san.txt > $OUT/sanitizer2.txt ) &
SANPID=$!
( time timeout 300 scripts/gpu-machine-build.sh build --deps .devcarry/deps.tar.gz --build-dir /tmp/bg ) > /tmp/build.txt 2>&1 || tail -30 /tmp/build.txt
mkdir -p /tmp/v && cd /tmp/v
v() { local name=$1; shift; echo "== $name: $*"; timeout 120 "$@" > $name.log 2>&1; echo "exit status $?"; grep -v "^step\|Warning\|loss_type" $name.log | tail -25; }
{
v A_host_only_gpu_train tierpack run -o a.tpk -- python3 $R/examples/train_hf.py --steps 3
v B_source_off tierpack run --python-source off -o b.tpk --gpu-budget 60% -- python3 $R/examples/train_hf.py --steps 3
v C_cpu_hf env CUDA_VISIBLE_DEVICES= tierpack run -o c.tpk -- python3 $R/examples/train_hf.py --steps 3
v D_train_cpu tierpack run -o d.tpk -- python3 $R/examples/train_cpu.py
v F_profile_only tierpack profile -o f.tpk -- python3 $R/examples/train_hf.py --steps 3
echo "== E: cuda-gdb backtrace of: tierpack run --gpu-budget 60% -o e.tpk -- python3 examples/train_hf.py --steps 3"
timeout 200 cuda-gdb -q -batch -ex "set follow-fork-mode child" -ex "set pagination off" -ex run -ex "bt 40" -ex "info threads" \
  --args $(command -v tierpack) run --gpu-budget 60% -o e.tpk -- python3 $R/examples/train_hf.py --steps 3 > E.log 2>&1
echo "exit status $?"; grep -v "^\[New Thread\|^\[Thread .* exited\|^step" E.log | tail -70
} > $OUT/variants.txt 2>&1
tar czf $OUT/variants.tgz -C /tmp v 2>/dev/null
wait $SANPID
grep -n "ERROR SUMMARY\|rc=\|Invalid\|Error\|OK\|FAILED" $OUT/sanitizer2.txt | head -20
grep -E "^== |exit status" $OUT/variants.txt
