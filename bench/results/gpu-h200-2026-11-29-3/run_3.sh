#!/bin/bash
# session 13, device call 3: the spill fix on CUDA, then the GPT-2 large table in one run (no
# --deterministic, as the earlier tables): default twice, checkpointing, save_on_cpu, tierpack 100..35%.
S=$(cd "$(dirname "$0")" && pwd)
export LD_LIBRARY_PATH=$S/lib:$LD_LIBRARY_PATH PYTHONUNBUFFERED=1
sec() { echo; echo "=== $* ($(date +%T))"; }
{
sec env; cat $S/COMMIT
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv; python3 -c "import torch; print('torch', torch.__version__, torch.version.cuda)"
sec tests
timeout 60 $S/bin/gpu_alloc_tests 2>&1 | grep -E "FAILED|Failure|PASSED|Expected|Which" | head; echo "gpu_alloc_tests exit ${PIPESTATUS[0]}"
sec gpt2-table
echo "command: python3 bench/gpu/gpt2_bench.py --steps 20 --warmup 3 --tierpack-warmup 5 --modes default_again,ckpt,save_on_cpu,tierpack --budgets 100,75,60,45,35 --gpu-opts chunk:64M --child-timeout 125"
timeout 540 python3 $S/bench/gpu/gpt2_bench.py --lib $S/lib/libtierpack_cuda.so --steps 20 --warmup 3 --tierpack-warmup 5 --modes default_again,ckpt,save_on_cpu,tierpack --budgets 100,75,60,45,35 --gpu-opts chunk:64M --child-timeout 125 --logs $OUT/logs --json $OUT/gpt2_table.json
for f in $OUT/logs/*; do echo "##### $f"; cat $f; done > $OUT/children_stderr.txt; rm -rf $OUT/logs
sec done
} > $OUT/log3.txt 2>&1
grep -v '^{' $OUT/log3.txt | tail -c 10000
