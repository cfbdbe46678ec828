#!/bin/bash
# session 13, device call 7: the bitwise control (60% without verification) and 45% with it, against
# call 6's deterministic default run.
S=$(cd "$(dirname "$0")" && pwd)
export LD_LIBRARY_PATH=$S/lib:$LD_LIBRARY_PATH PYTHONUNBUFFERED=1
{
for spec in "60 chunk:64M,verify:off" "45 chunk:64M"; do set -- $spec
echo "command: python3 bench/gpu/gpt2_bench.py --deterministic --baseline call6_det_baseline.json --steps 20 --warmup 3 --tierpack-warmup 5 --modes tierpack --budgets $1 --gpu-opts $2 --child-timeout 115"
timeout 125 python3 $S/bench/gpu/gpt2_bench.py --lib $S/lib/libtierpack_cuda.so --deterministic --baseline $S/call6_det_baseline.json --steps 20 --warmup 3 --tierpack-warmup 5 --modes tierpack --budgets $1 --gpu-opts $2 --child-timeout 115 --json $OUT/gpt2_det_$1.json
done
python3 - <<'PY'
import json, os, glob
out = os.environ["OUT"]
base = json.load(open(os.path.join(os.environ.get("S", "."), "call6_det_baseline.json")))["results"][0]["losses"] if False else None
PY
python3 -c "
import json,glob,sys
base=json.load(open('$S/call6_det_baseline.json'))['results'][0]['losses']
for f in sorted(glob.glob('$OUT/gpt2_det_*.json')):
    for r in json.load(open(f))['results']:
        if r.get('reused_from'): continue
        L=r.get('losses',[]); n=min(len(L),len(base))
        print(f.split('/')[-1], r.get('pct'), r.get('error',''), 'bit-identical losses: %d of %d' % (sum(1 for i in range(n) if L[i]==base[i]), n), ' '.join('%.6f' % x for x in L[:n]))
"
} > $OUT/log7.txt 2>&1
grep -v '^{' $OUT/log7.txt | tail -c 6000
