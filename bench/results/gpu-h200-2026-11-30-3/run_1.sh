#!/bin/bash
# session 18, device call 1: the CUDA suites (record_stream forwarding in the allocator), record_stream
# on a real GPU under torch 2.11, and GPT-2 large at 60% with the remap gates on and off (diagnostic).
S=$(cd "$(dirname "$0")" && pwd)
export LD_LIBRARY_PATH=$S/lib:$LD_LIBRARY_PATH PYTHONUNBUFFERED=1 PYTHONPATH=$S/python TIERPACK_CUDA_LIB=$S/lib/libtierpack_cuda.so
{
echo "commit $(cat $S/COMMIT) + working tree"; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; python3 -c 'import torch;print("torch",torch.__version__)'
for t in gpu_alloc_tests gpu_migrate_tests gpu_runtime_tests; do echo "== $t"; timeout 150 $S/bin/$t 2>&1 | grep -E "^\[  (PASSED|FAILED|SKIPPED) |FAILED|tests ran" | tail -8; done
echo "== record_stream_cuda_test"; timeout 150 python3 $S/tests/record_stream_cuda_test.py -v 2>&1 | tail -12
for o in chunk:64M chunk:64M,verify:off chunk:64M,gate:off,verify:off; do
echo "command: python3 bench/gpu/gpt2_bench.py --baseline call6_baseline.json --steps 20 --warmup 3 --tierpack-warmup 5 --modes tierpack --budgets 60 --gpu-opts $o --child-timeout 100"
n=$(echo $o | tr ':,' '__')
timeout 130 python3 $S/bench/gpu/gpt2_bench.py --baseline $S/call6_baseline.json --lib $S/lib/libtierpack_cuda.so --steps 20 --warmup 3 --tierpack-warmup 5 --modes tierpack --budgets 60 --gpu-opts $o --child-timeout 100 --json $OUT/gpt2_$n.json --logs $OUT/logs_$n
done
} > $OUT/log1.txt 2>&1
grep -v '^{' $OUT/log1.txt | tail -c 11000
