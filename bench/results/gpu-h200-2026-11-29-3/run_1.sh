#!/bin/bash
# session 13, device call 1: CUDA suites (verified remaps), checksum/migrate bench, GPT-2 large deterministic
# default x2 vs tierpack 100% and 60% with verify:all.
S=$(cd "$(dirname "$0")" && pwd)
export LD_LIBRARY_PATH=$S/lib:$LD_LIBRARY_PATH PYTHONUNBUFFERED=1
sec() { echo; echo "=== $* ($(date +%T))"; }
{
sec env; cat $S/COMMIT
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv; python3 -c "import torch; print('torch', torch.__version__, torch.version.cuda)"; uname -r
sec tests
for t in gpu_migrate_tests gpu_alloc_tests gpu_runtime_tests; do timeout 90 $S/bin/$t 2>&1 | grep -E "FAILED|Failure|PASSED|SKIPPED \]|Expected|Which|actual|error" | head -20; echo "$t exit ${PIPESTATUS[0]}"; done
sec bench
timeout 100 $S/bin/gpu_alloc_bench --benchmark_filter='Checksum|BM_Migrate/(128|512|2048)/32/|PinnedCopy/512' 2>&1 | grep -v "^\*\*\*"
sec gpt2
echo "command: python3 bench/gpu/gpt2_bench.py --deterministic --steps 20 --warmup 3 --tierpack-warmup 5 --modes default,default_again,tierpack --budgets 100,60 --gpu-opts chunk:64M,verify:all --child-timeout 200"
timeout 420 python3 $S/bench/gpu/gpt2_bench.py --lib $S/lib/libtierpack_cuda.so --deterministic --steps 20 --warmup 3 --tierpack-warmup 5 --modes default,default_again,tierpack --budgets 100,60 --gpu-opts chunk:64M,verify:all --child-timeout 200 --logs $OUT/logs --json $OUT/gpt2_verify.json
sec done
} > $OUT/log1.txt 2>&1
grep -v '^{' $OUT/log1.txt | tail -c 10000
