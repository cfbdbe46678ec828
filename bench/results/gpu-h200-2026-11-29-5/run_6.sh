#!/bin/bash
# session 15, device call 6 (nvidia-h200): what a 35% iteration spends its time on (few steps, the new
# per-iteration counters), since 25 iterations do not finish in 140 s.
S=$(cd "$(dirname "$0")" && pwd)
export LD_LIBRARY_PATH=$S/lib:$LD_LIBRARY_PATH PYTHONUNBUFFERED=1
export TIERPACK_CONF=stats_out:$OUT/s35.json
{
echo "commit $(cat $S/COMMIT)"
echo "command: python3 bench/gpu/gpt2_bench.py --baseline call3_baseline.json --steps 3 --warmup 1 --tierpack-warmup 4 --modes tierpack --budgets 35 --gpu-opts chunk:64M --child-timeout 230"
timeout 250 python3 $S/bench/gpu/gpt2_bench.py --lib $S/lib/libtierpack_cuda.so --baseline $S/call3_baseline.json --steps 3 --warmup 1 --tierpack-warmup 4 --modes tierpack --budgets 35 --gpu-opts chunk:64M --child-timeout 230 --json $OUT/gpt2_35_short.json
python3 - $OUT/gpt2_35_short.json <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
for r in d["results"]:
    t = r.get("tierpack")
    if not t: continue
    for it in t.get("iterations", []):
        print({k: (round(v, 1) if isinstance(v, float) else v) for k, v in it.items() if k in (
            "iteration", "phase", "seconds", "bytes_to_host", "bytes_to_device", "stalls", "stall_ms", "misses",
            "gate_hold_ms", "gates", "pressure_waits", "pressure_wait_ms", "spilled_chunks", "closed_arena_fallbacks",
            "peak_device_bytes")})
PY
ls -la $OUT
} > $OUT/log6.txt 2>&1
grep -v '^{' $OUT/log6.txt | tail -c 6000
