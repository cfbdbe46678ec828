#!/bin/bash
# gpu2 device call 1: CUDA suites (hidden-kernel gate test), GPT-2 large at 60/45/35% with the remap gate.
S=$(cd "$(dirname "$0")" && pwd)
export LD_LIBRARY_PATH=$S/lib:$LD_LIBRARY_PATH PYTHONUNBUFFERED=1
sec() { echo; echo "=== $* ($(date +%T))"; }
{
sec env; cat $S/COMMIT
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv; python3 -c "import torch; print('torch', torch.__version__, torch.version.cuda)"
sec tests
for t in gpu_alloc_tests gpu_migrate_tests gpu_runtime_tests; do timeout 150 $S/bin/$t 2>&1 | grep -E "FAILED|Failure|PASSED|info|SKIPPED \]|error|Expected|Which|actual" | head -30; echo "$t exit ${PIPESTATUS[0]}"; done
sec gpt2
timeout 400 python3 $S/bench/gpu/gpt2_bench.py --lib $S/lib/libtierpack_cuda.so --baseline $S/gpt2_part1.json --steps 10 --tierpack-warmup 6 --modes tierpack --budgets 60,45,35 --gpu-opts chunk:64M --child-timeout 130 --json $OUT/gpt2_call1.json
sec done
} > $OUT/log1.txt 2>&1
grep -v '^{' $OUT/log1.txt | tail -c 9000
