#!/bin/bash
# session 14, device call 3 (nvidia-h200-x2): CUDA mover/runtime suites with this session's changes,
# then the two-GPU DDP GPT-2 large benchmark (issue 10) after the divergence fix (call 2: a barrier
# between warm-up and timed steps made every rank fall back for good).
S=$(cd "$(dirname "$0")" && pwd)
export LD_LIBRARY_PATH=$S/lib:$LD_LIBRARY_PATH PYTHONUNBUFFERED=1
mkdir -p $OUT/logs
sec() { echo; echo "== $1 ($(date +%T))"; }
{
echo "commit $(cat $S/COMMIT)"
nvidia-smi --query-gpu=index,name,driver_version,memory.total --format=csv
python3 -c "import torch; print('torch', torch.__version__, 'cuda', torch.version.cuda, 'nccl', torch.cuda.nccl.version())"
sec "cuda suites"
CUDA_VISIBLE_DEVICES=0 TIERPACK_STRESS_MIGRATIONS=2000 timeout 60 $S/bin/gpu_migrate_tests --gtest_filter='*cuda*' 2>&1 | grep -E "^\[  (PASSED|FAILED)|FAILED|OK \]" | tail -20
CUDA_VISIBLE_DEVICES=0 timeout 40 $S/bin/gpu_runtime_tests 2>&1 | grep -E "^\[  (PASSED|FAILED)|FAILED" | tail -5
sec "ddp"
echo "command: python3 bench/gpu/ddp_bench.py --ranks 2 --budgets 60,45 --steps 10 --warmup 3 --tierpack-warmup 5 --gpu-opts chunk:64M --child-timeout 210 --logs logs"
timeout 480 python3 $S/bench/gpu/ddp_bench.py --lib $S/lib/libtierpack_cuda.so --ranks 2 --budgets 60,45 --steps 10 --warmup 3 --tierpack-warmup 5 --gpu-opts chunk:64M --child-timeout 210 --logs $OUT/logs --json $OUT/ddp.json 2>&1 | grep -v '^{'
for f in $OUT/logs/tierpack*.stderr.txt; do echo "--- $f"; grep -v "^\*\*\*\|OMP_NUM\|UserWarning\|warnings.warn" $f | head -c 2500; echo; done
for f in $OUT/logs/*.stats.*.json; do echo "--- $f"; python3 -c "
import json,sys; d=json.load(open('$f')); print('phase',d.get('phase'),'divergences',d.get('divergences'),d.get('divergence'))
for r in d.get('iterations',[]): print({k:(round(r[k],2) if isinstance(r[k],float) else r[k]) for k in r if k in ('iteration','phase','seconds','bytes_to_host','bytes_to_device','stalls','stall_ms','gates','busy_gates','gate_hold_ms','gate_timeouts','misses','failures','peak_device_bytes')})"; done
} > $OUT/log3.txt 2>&1
cd $OUT && tar czf logs.tgz logs && rm -rf logs
grep -v '^{' $OUT/log3.txt | tail -c 11000
