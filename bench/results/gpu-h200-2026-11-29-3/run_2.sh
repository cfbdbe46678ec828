#!/bin/bash
# session 13, device call 2: CUDA suites, checksum/verify bench, GPT-2 large deterministic at 75% and 60%
# with the default verification (sampled) and the schedule repair, and 60% without verification.
S=$(cd "$(dirname "$0")" && pwd)
export LD_LIBRARY_PATH=$S/lib:$LD_LIBRARY_PATH PYTHONUNBUFFERED=1
sec() { echo; echo "=== $* ($(date +%T))"; }
{
sec env; cat $S/COMMIT
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv; python3 -c "import torch; print('torch', torch.__version__, torch.version.cuda)"
sec tests
for t in gpu_migrate_tests gpu_alloc_tests gpu_runtime_tests; do timeout 90 $S/bin/$t 2>&1 | grep -E "FAILED|Failure|PASSED|SKIPPED \]|Expected|Which|actual|error|info" | head -20; echo "$t exit ${PIPESTATUS[0]}"; done
sec bench
timeout 100 $S/bin/gpu_alloc_bench --benchmark_filter='Checksum|BM_Migrate/(512|2048)/32/' 2>&1 | grep -v "^\*\*\*"
sec gpt2
echo "command: python3 bench/gpu/gpt2_bench.py --deterministic --baseline call1_baseline.json --steps 20 --warmup 3 --tierpack-warmup 5 --modes tierpack --budgets 75,60 --gpu-opts chunk:64M --child-timeout 170"
timeout 360 python3 $S/bench/gpu/gpt2_bench.py --lib $S/lib/libtierpack_cuda.so --deterministic --baseline $S/call1_baseline.json --steps 20 --warmup 3 --tierpack-warmup 5 --modes tierpack --budgets 75,60 --gpu-opts chunk:64M --child-timeout 170 --logs $OUT/logs --json $OUT/gpt2_sampled.json
echo "command: ... --budgets 60 --gpu-opts chunk:64M,verify:off"
timeout 170 python3 $S/bench/gpu/gpt2_bench.py --lib $S/lib/libtierpack_cuda.so --deterministic --baseline $S/call1_baseline.json --steps 20 --warmup 3 --tierpack-warmup 5 --modes tierpack --budgets 60 --gpu-opts chunk:64M,verify:off --child-timeout 160 --logs $OUT/logs --json $OUT/gpt2_off.json
sec done
} > $OUT/log2.txt 2>&1
grep -v '^{' $OUT/log2.txt | tail -c 10000
