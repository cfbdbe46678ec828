#!/bin/bash
# session 13, device call 6: bitwise check with warn_only=False (deterministic flash attention backward).
# default runs are then bit-identical, a tierpack run that moves groups must be too.
S=$(cd "$(dirname "$0")" && pwd)
export LD_LIBRARY_PATH=$S/lib:$LD_LIBRARY_PATH PYTHONUNBUFFERED=1
sec() { echo; echo "=== $* ($(date +%T))"; }
{
sec env; cat $S/COMMIT
sec gpt2-deterministic
echo "command: python3 bench/gpu/gpt2_bench.py --deterministic --steps 20 --warmup 3 --tierpack-warmup 5 --modes default_again,tierpack --budgets 60 --gpu-opts chunk:64M --child-timeout 110"
timeout 300 python3 $S/bench/gpu/gpt2_bench.py --lib $S/lib/libtierpack_cuda.so --deterministic --steps 20 --warmup 3 --tierpack-warmup 5 --modes default_again,tierpack --budgets 60 --gpu-opts chunk:64M --child-timeout 110 --logs $OUT/logs --json $OUT/gpt2_det.json
python3 - <<'PY'
import json, os
out = os.environ["OUT"]
runs = json.load(open(f"{out}/gpt2_det.json"))["results"]
base = runs[0]["losses"]
for r in runs:
    L = r.get("losses", [])
    n = min(len(L), len(base))
    same = sum(1 for i in range(n) if L[i] == base[i])
    print(r["mode"], r.get("pct"), r.get("error", ""), f"bit-identical losses: {same} of {n}", " ".join(f"{x:.6f}" for x in L[:n]))
PY
for f in $OUT/logs/*; do echo "##### $f"; cat $f; done > $OUT/children_stderr.txt; rm -rf $OUT/logs
sec done
} > $OUT/log6.txt 2>&1
grep -v '^{' $OUT/log6.txt | tail -c 8000
