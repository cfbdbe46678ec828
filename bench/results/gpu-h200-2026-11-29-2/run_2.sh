#!/bin/bash
# gpu2 device call 2: CUDA suites, GPT-2 large table (one run), tierpack run --gpu-budget, sanitizer, remap threads.
S=$(cd "$(dirname "$0")" && pwd)
export LD_LIBRARY_PATH=$S/lib:$LD_LIBRARY_PATH PYTHONUNBUFFERED=1
sec() { echo; echo "=== $* ($(date +%T))"; }
{
sec env; cat $S/COMMIT
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv; python3 -c "import torch; print('torch', torch.__version__, torch.version.cuda)"; uname -r
ldd $S/bin/tierpack | grep "not found"
sec tests
for t in gpu_alloc_tests gpu_migrate_tests gpu_runtime_tests; do timeout 100 $S/bin/$t 2>&1 | grep -E "FAILED|Failure|PASSED|info\] (cuda|twin)|SKIPPED \]|Expected|Which" | head -20; echo "$t exit ${PIPESTATUS[0]}"; done
sec gpt2-table
echo "command: python3 bench/gpu/gpt2_bench.py --steps 20 --warmup 3 --tierpack-warmup 5 --modes default,ckpt,save_on_cpu,tierpack --budgets 100,75,60,45,35 --gpu-opts chunk:64M,remap_threads:4 --child-timeout 120"
timeout 400 python3 $S/bench/gpu/gpt2_bench.py --lib $S/lib/libtierpack_cuda.so --steps 20 --warmup 3 --tierpack-warmup 5 --modes default,ckpt,save_on_cpu,tierpack --budgets 100,75,60,45,35 --gpu-opts chunk:64M,remap_threads:4 --child-timeout 120 --json $OUT/gpt2_table.json
sec tierpack-run
: > $S/lib/no_torch_integration.so
export TIERPACK_LIB=$S/lib/no_torch_integration.so TIERPACK_CUDA_LIB=$S/lib/libtierpack_cuda.so
echo "command: tierpack run --gpu-budget 20G -o run_gpt2l.tpk -- python3 bench/gpu/gpt2_bench.py --child default --steps 6 --warmup 3"
timeout 80 $S/bin/tierpack run --gpu-budget 20G -o $OUT/run_gpt2l.tpk -- python3 $S/bench/gpu/gpt2_bench.py --child default --steps 6 --warmup 3 --lib $S/lib/libtierpack_cuda.so 2>&1 | grep -v '^RESULT' | tail -25
echo "exit ${PIPESTATUS[0]}"; ls -la $OUT
sec compute-sanitizer
TIERPACK_STRESS_MIGRATIONS=200 TIERPACK_STRESS_ROUNDS=16 timeout 80 compute-sanitizer --tool memcheck --error-exitcode 9 $S/bin/gpu_migrate_tests --gtest_filter='*cuda*' 2>&1 | grep -E "OK|FAILED|ERROR SUMMARY|PASSED" | tail -12
sec done
} > $OUT/log2.txt 2>&1
grep -v '^{' $OUT/log2.txt | tail -c 11000
