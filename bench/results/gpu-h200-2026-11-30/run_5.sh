#!/bin/bash
# session 16, device call 5 (nvidia-h200): the GPU run statistics (Note [GPU run statistics]) from
# GPT-2 large at 60% and the report made from them with the GPU tier's profile; the CUDA suites.
S=$(cd "$(dirname "$0")" && pwd)
export LD_LIBRARY_PATH=$S/lib:$LD_LIBRARY_PATH PYTHONUNBUFFERED=1
sec() { echo; echo "== $1 ($(date +%T))"; }
{
echo "commit $(cat $S/COMMIT)"
for t in ; do
  sec $t; timeout 100 $S/bin/$t 2>&1 | grep -E "^\[  (PASSED|FAILED|SKIPPED) |^\[==========\]|FAILED" | tail -8
done
sec "60% with run statistics"
echo "command: TIERPACK_CONF=stats_out:\$OUT/gpt2_60.json python3 bench/gpu/gpt2_bench.py --baseline call3_baseline.json --steps 20 --warmup 3 --tierpack-warmup 5 --modes tierpack --budgets 60 --gpu-opts chunk:64M,profile_out:/tmp/gpt2_60.tpk --child-timeout 80"
TIERPACK_CONF=stats_out:$OUT/gpt2_60.json timeout 85 python3 $S/bench/gpu/gpt2_bench.py --lib $S/lib/libtierpack_cuda.so --baseline $S/call3_baseline.json --steps 20 --warmup 3 --tierpack-warmup 5 --modes tierpack --budgets 60 --gpu-opts chunk:64M,profile_out:/tmp/gpt2_60.tpk --child-timeout 80 --json /tmp/gpt2_60_bench.json | grep -E "tierpack 60|error|Error" | cut -c1-600
ls -la $OUT /tmp/gpt2_60.tpk
sec report
echo "command: tierpack report /tmp/gpt2_60.tpk --run-stats gpt2_60.gpu0.run.json -o /tmp/report"
timeout 120 $S/bin/tierpack report /tmp/gpt2_60.tpk --run-stats $OUT/gpt2_60.gpu0.run.json -o /tmp/report; echo "rc=$?"
ls -la /tmp/report
cp /tmp/report/index.html $OUT/report_index.html
python3 - $OUT/gpt2_60.gpu0.run.json <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
print('sampled iteration', d['sampled_iteration'], 'iterations', len(d['iterations']), 'moves', len(d['moves']), 'stalls', len(d['stalls']), 'occupancy samples', len(d['occupancy']))
its = [i for i in d['iterations'] if i['index'] > 8]
print('median step ms', sorted(i['step_ns'] for i in its)[len(its)//2] / 1e6)
mv = d['moves']
for k in ('evict', 'prefetch'):
    m = [x for x in mv if x['kind'] == k]
    if m: print(k, len(m), 'moves', sum(x['bytes'] for x in m) / 2**30, 'GiB, mean duration ms', sum(x['end_ns'] - x['start_ns'] for x in m) / len(m) / 1e6)
PY
sec done
} > $OUT/log5.txt 2>&1
rm -f $OUT/gpt2_60.json.tmp
cat $OUT/log5.txt | tail -c 6000
