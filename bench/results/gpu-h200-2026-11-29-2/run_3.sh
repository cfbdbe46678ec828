#!/bin/bash
# gpu2 device call 3: GPT-2 large at 45% and 35% (loss vs a default run of the same call), sanitizer detail.
S=$(cd "$(dirname "$0")" && pwd)
export LD_LIBRARY_PATH=$S/lib:$LD_LIBRARY_PATH PYTHONUNBUFFERED=1
sec() { echo; echo "=== $* ($(date +%T))"; }
{
sec env; cat $S/COMMIT
sec sanitizer-hidden-kernel
TIERPACK_STRESS_ROUNDS=8 timeout 45 compute-sanitizer --tool memcheck --print-limit 2 $S/bin/gpu_migrate_tests --gtest_filter='*cuda.HiddenKernel*' 2>&1 | grep -vE "^\[ RUN|^=========     (Host|Device) Frame|^=========         " | head -40
sec gpt2-low-budgets
echo "command: python3 bench/gpu/gpt2_bench.py --steps 10 --warmup 3 --tierpack-warmup 5 --modes default,tierpack --budgets 45,35 --gpu-opts chunk:64M,remap_threads:4 --child-timeout 165"
timeout 370 python3 $S/bench/gpu/gpt2_bench.py --lib $S/lib/libtierpack_cuda.so --steps 10 --warmup 3 --tierpack-warmup 5 --modes default,tierpack --budgets 45,35 --gpu-opts chunk:64M,remap_threads:4 --child-timeout 165 --json $OUT/gpt2_low.json
sec done
} > $OUT/log3.txt 2>&1
tail -c 9000 $OUT/log3.txt
