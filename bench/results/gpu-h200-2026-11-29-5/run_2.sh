#!/bin/bash
# session 15, device call 2 (nvidia-h200): GPT-2 large at 60% with 128 MiB and 256 MiB chunks, 35% with
# 64 MiB, and the 50-step deterministic loss check (default vs tierpack 60%, bit for bit).
S=$(cd "$(dirname "$0")" && pwd)
export LD_LIBRARY_PATH=$S/lib:$LD_LIBRARY_PATH PYTHONUNBUFFERED=1
mkdir -p $OUT/logs
sec() { echo; echo "== $1 ($(date +%T))"; }
B="python3 $S/bench/gpu/gpt2_bench.py --lib $S/lib/libtierpack_cuda.so"
{
echo "commit $(cat $S/COMMIT)"
for c in 128M 256M; do
  sec "60% chunk $c"
  echo "command: python3 bench/gpu/gpt2_bench.py --baseline call3_baseline.json --steps 20 --warmup 3 --tierpack-warmup 5 --modes tierpack --budgets 60 --gpu-opts chunk:$c --child-timeout 90"
  timeout 100 $B --baseline $S/call3_baseline.json --steps 20 --warmup 3 --tierpack-warmup 5 --modes tierpack --budgets 60 --gpu-opts chunk:$c --child-timeout 90 --logs $OUT/logs --json $OUT/gpt2_60_chunk_$c.json
done
sec "35% chunk 64M"
echo "command: python3 bench/gpu/gpt2_bench.py --baseline call3_baseline.json --steps 20 --warmup 3 --tierpack-warmup 5 --modes tierpack --budgets 35 --gpu-opts chunk:64M --child-timeout 140"
timeout 150 $B --baseline $S/call3_baseline.json --steps 20 --warmup 3 --tierpack-warmup 5 --modes tierpack --budgets 35 --gpu-opts chunk:64M --child-timeout 140 --logs $OUT/logs --json $OUT/gpt2_35.json
sec "deterministic 50 steps"
echo "command: python3 bench/gpu/gpt2_bench.py --deterministic --steps 50 --warmup 3 --tierpack-warmup 5 --modes default,tierpack --budgets 60 --gpu-opts chunk:64M --child-timeout 150"
timeout 200 $B --deterministic --steps 50 --warmup 3 --tierpack-warmup 5 --modes default,tierpack --budgets 60 --gpu-opts chunk:64M --child-timeout 150 --logs $OUT/logs --json $OUT/gpt2_det50.json
python3 - $OUT/gpt2_det50.json <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
r = {x['mode'] + str(x.get('pct')): x for x in d['results']}
a = r['defaultNone']['losses']; b = r['tierpack60.0']['losses']
n = min(len(a), len(b))
print('losses compared', n, 'bit-identical', sum(x == y for x, y in zip(a[:n], b[:n])), 'max rel diff %.3e' % max(abs(x - y) / abs(x) for x, y in zip(a[:n], b[:n])))
PY
sec done
} > $OUT/log2.txt 2>&1
cd $OUT && tar czf logs.tgz logs && rm -rf logs
grep -v '^{' $OUT/log2.txt | tail -c 9000
