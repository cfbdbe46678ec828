#!/bin/bash
# session 13, device call 5: bitwise check. --deterministic now also turns cuDNN attention off; if two
# default runs are then bit-identical, a tierpack run that moves groups must be too.
S=$(cd "$(dirname "$0")" && pwd)
export LD_LIBRARY_PATH=$S/lib:$LD_LIBRARY_PATH PYTHONUNBUFFERED=1
sec() { echo; echo "=== $* ($(date +%T))"; }
{
sec env; cat $S/COMMIT
sec gpt2-deterministic
echo "command: python3 bench/gpu/gpt2_bench.py --deterministic --steps 20 --warmup 3 --tierpack-warmup 5 --modes default_again,tierpack --budgets 60 --gpu-opts chunk:256M --child-timeout 120"
timeout 300 python3 $S/bench/gpu/gpt2_bench.py --lib $S/lib/libtierpack_cuda.so --deterministic --steps 20 --warmup 3 --tierpack-warmup 5 --modes default_again,tierpack --budgets 60 --gpu-opts chunk:256M --child-timeout 120 --logs $OUT/logs --json $OUT/gpt2_det.json
echo "command: ... --baseline (the above) --modes tierpack --budgets 60 --gpu-opts chunk:64M"
timeout 130 python3 $S/bench/gpu/gpt2_bench.py --lib $S/lib/libtierpack_cuda.so --deterministic --baseline $OUT/gpt2_det.json --steps 20 --warmup 3 --tierpack-warmup 5 --modes tierpack --budgets 60 --gpu-opts chunk:64M --child-timeout 120 --logs $OUT/logs --json $OUT/gpt2_det_64M.json
python3 - <<'PY'
import json, os
out = os.environ["OUT"]
runs = json.load(open(f"{out}/gpt2_det.json"))["results"] + [r for r in json.load(open(f"{out}/gpt2_det_64M.json"))["results"] if not r.get("reused_from")]
base = runs[0]["losses"]
for r in runs:
    L = r.get("losses", [])
    n = min(len(L), len(base))
    same = sum(1 for i in range(n) if L[i] == base[i])
    print(r["mode"], r.get("pct"), r.get("error", ""), f"bit-identical losses: {same} of {n}", " ".join(f"{x:.6f}" for x in L[:n]))
PY
for f in $OUT/logs/*; do echo "##### $f"; cat $f; done > $OUT/children_stderr.txt; rm -rf $OUT/logs
sec done
} > $OUT/log5.txt 2>&1
grep -v '^{' $OUT/log5.txt | tail -c 8000
