#!/bin/bash
# session 15, device call 1 (nvidia-h200): the CUDA test suites (145e525's gate fix never ran on a GPU),
# compute-sanitizer memcheck of the mover's CUDA tests, then GPT-2 large at 60/45% with the new planner.
S=$(cd "$(dirname "$0")" && pwd)
export LD_LIBRARY_PATH=$S/lib:$LD_LIBRARY_PATH PYTHONUNBUFFERED=1
mkdir -p $OUT/logs
sec() { echo; echo "== $1 ($(date +%T))"; }
{
sec machine; nvidia-smi --query-gpu=index,name,driver_version,memory.total --format=csv
python3 -c "import torch; print('torch', torch.__version__, 'cuda', torch.version.cuda)"
echo "commit $(cat $S/COMMIT)"
for t in gpu_alloc_tests gpu_migrate_tests gpu_runtime_tests; do
  sec $t; timeout 150 $S/bin/$t 2>&1 | grep -E "^\[  (PASSED|FAILED|SKIPPED) |^\[==========\]|FAILED|tests? from .* ran" | tail -12
done
sec compute-sanitizer
echo "command: TIERPACK_STRESS_MIGRATIONS=200 TIERPACK_STRESS_ROUNDS=16 compute-sanitizer --tool memcheck --error-exitcode 9 gpu_migrate_tests --gtest_filter='*cuda*'"
TIERPACK_STRESS_MIGRATIONS=200 TIERPACK_STRESS_ROUNDS=16 timeout 120 compute-sanitizer --tool memcheck --error-exitcode 9 $S/bin/gpu_migrate_tests --gtest_filter='*cuda*' 2>&1 | grep -E "OK \]|FAILED|ERROR SUMMARY|PASSED" | tail -40; echo "rc=${PIPESTATUS[0]}"
sec gpt2
echo "command: python3 bench/gpu/gpt2_bench.py --baseline call3_baseline.json --steps 20 --warmup 3 --tierpack-warmup 5 --modes tierpack --budgets 60,45 --gpu-opts chunk:64M --child-timeout 150 --logs logs"
timeout 300 python3 $S/bench/gpu/gpt2_bench.py --lib $S/lib/libtierpack_cuda.so --baseline $S/call3_baseline.json --steps 20 --warmup 3 --tierpack-warmup 5 --modes tierpack --budgets 60,45 --gpu-opts chunk:64M --child-timeout 150 --logs $OUT/logs --json $OUT/gpt2_60_45.json
sec done
} > $OUT/log1.txt 2>&1
cd $OUT && tar czf logs.tgz logs && rm -rf logs
grep -v '^{' $OUT/log1.txt | tail -c 9000
