#!/bin/bash
# session 14, device call 2 (nvidia-h200-x2): remap cost with copies in small pieces; the CUDA mover
# suites incl. idle remaps; GPT-2 large at 60% with eager vs idle remaps (Note [When to remap]);
# the DDP job at 60% with each rank's stderr and GPU statistics kept (call 1 timed out, no logs).
S=$(cd "$(dirname "$0")" && pwd)
export LD_LIBRARY_PATH=$S/lib:$LD_LIBRARY_PATH PYTHONUNBUFFERED=1
mkdir -p $OUT/logs
sec() { echo; echo "== $1 ($(date +%T))"; }
{
echo "commit $(cat $S/COMMIT)"
sec "remap parts, copies in 4 MiB pieces"
CUDA_VISIBLE_DEVICES=0 timeout 60 $S/bin/gpu_alloc_bench --benchmark_filter='RemapParts/(64|256)/[01]/0/2/1' 2>&1 | grep -v "^\*\*\*"
sec "cuda mover suites"
CUDA_VISIBLE_DEVICES=0 TIERPACK_STRESS_MIGRATIONS=2000 timeout 90 $S/bin/gpu_migrate_tests --gtest_filter='*cuda*' 2>&1 | grep -E "^\[  (PASSED|FAILED)|FAILED|OK \]" | tail -40
for opts in "chunk:64M" "chunk:64M,remap:idle" "chunk:128M,remap:idle" "chunk:64M,remap:idle,copy_piece:8M"; do
sec "gpt2 60% $opts"
echo "command: python3 bench/gpu/gpt2_bench.py --baseline call3_baseline.json --steps 20 --warmup 3 --tierpack-warmup 5 --modes tierpack --budgets 60 --gpu-opts $opts --child-timeout 80"
CUDA_VISIBLE_DEVICES=0 timeout 90 python3 $S/bench/gpu/gpt2_bench.py --lib $S/lib/libtierpack_cuda.so --baseline $S/call3_baseline.json --steps 20 --warmup 3 --tierpack-warmup 5 --modes tierpack --budgets 60 --gpu-opts $opts --child-timeout 80 --json $OUT/logs/gpt2_60_${opts//[:,]/_}.json 2>&1 | grep -E "^\| tierpack|error|Error" | head -5
done
sec "ddp 60% with logs"
echo "command: python3 bench/gpu/ddp_bench.py --ranks 2 --budgets 60 --steps 10 --warmup 3 --tierpack-warmup 5 --gpu-opts chunk:64M --child-timeout 100 --logs logs"
timeout 150 python3 $S/bench/gpu/ddp_bench.py --lib $S/lib/libtierpack_cuda.so --ranks 2 --budgets 60 --steps 10 --warmup 3 --tierpack-warmup 5 --gpu-opts chunk:64M --child-timeout 100 --logs $OUT/logs --json $OUT/logs/ddp60.json 2>&1 | grep -v '^{'
for f in $OUT/logs/tierpack*.stderr.txt; do echo "--- $f"; head -c 3000 $f; echo; tail -c 1500 $f; done
for f in $OUT/logs/*.stats.*.json; do echo "--- $f"; python3 -c "
import json,sys; d=json.load(open('$f')); print('phase',d.get('phase'),'iteration',d.get('iteration'))
for r in d.get('iterations',[])[-4:]: print({k:r[k] for k in r if k in ('iteration','phase','seconds','events','bytes_to_host','bytes_to_device','stalls','stall_ms','gates','gate_hold_ms','gate_timeouts','busy_gates','misses','failures')})"; done
} > $OUT/log2.txt 2>&1
cd $OUT && tar czf logs.tgz logs && rm -rf logs
grep -v '^{' $OUT/log2.txt | tail -c 11000
