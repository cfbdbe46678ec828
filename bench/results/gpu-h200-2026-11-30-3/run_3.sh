#!/bin/bash
# session 18, device call 3: the CUDA suites with this session's planner/allocator/executor fixes, then
# the whole GPT-2 large table from one run.
S=$(cd "$(dirname "$0")" && pwd)
export LD_LIBRARY_PATH=$S/lib:$LD_LIBRARY_PATH PYTHONUNBUFFERED=1 PYTHONPATH=$S/python
{
echo "commit $(cat $S/COMMIT)"; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; python3 -c 'import torch;print("torch",torch.__version__)'
for t in gpu_alloc_tests gpu_migrate_tests gpu_runtime_tests; do echo "== $t"; timeout 100 $S/bin/$t 2>&1 | grep -E "^\[  (PASSED|FAILED) |FAILED|tests ran" | tail -8; done
echo "command: python3 bench/gpu/gpt2_bench.py --steps 20 --warmup 3 --tierpack-warmup 5 --modes default,ckpt,save_on_cpu,tierpack --budgets 100,75,60,45,35 --gpu-opts chunk:64M --child-timeout 200"
timeout 480 python3 $S/bench/gpu/gpt2_bench.py --lib $S/lib/libtierpack_cuda.so --steps 20 --warmup 3 --tierpack-warmup 5 --modes default,ckpt,save_on_cpu,tierpack --budgets 100,75,60,45,35 --gpu-opts chunk:64M --child-timeout 200 --json $OUT/gpt2_table.json --logs $OUT/logs
} > $OUT/log3.txt 2>&1
tar czf $OUT/logs3.tgz -C $OUT logs && rm -rf $OUT/logs
grep -v '^{' $OUT/log3.txt | tail -c 9000
