#!/bin/bash
# Session 32, device call 2 (commit COMMIT2): the plan fetches in backward the optimizer state that fits to the
# iteration's end and the streamed step keeps it (the step fetches and sends out only the rest); the step's calls
# count live bytes and the window, not a whole step's temporaries; a plan's first iteration counts its peaks from its
# first call; a limit lowered for reserved memory rises again when the allocator holds less. As call 1: the CUDA
# test of a streamed step; Llama-style and GPT-2 large with step:stream at 60% of checkpointing's NVML peak.
export PYTHONUNBUFFERED=1 TIERPACK_CUDA_LIB=$PWD/.devcarry/lib/libtierpack_cuda.so
D=bench/results/gpu-h200-2026-12-06-1
N=2
rm -rf /tmp/logs
{ echo "commit $(cat $D/COMMIT$N)"; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; python3 -c 'import torch, transformers;print("torch",torch.__version__, "transformers", transformers.__version__)'; } > $OUT/env$N.txt
cat $OUT/env$N.txt
run() {  # model modes budgets at-ckpt-budgets timeout [more options]
  timeout $5 python3 bench/gpu/models_bench.py --lib $TIERPACK_CUDA_LIB --steps 4 --warmup 3 --tierpack-warmup 14 --child-timeout 100 \
    --commit $(cat $D/COMMIT$N) --logs /tmp/logs --models $1 --modes $2 --budgets "$3" ${4:+--at-ckpt-budgets $4} $6 \
    --json $OUT/call${N}_$1.json > $OUT/call${N}_$1.txt 2>&1
  echo "rc=$?" >> $OUT/call${N}_$1.txt
  grep -v "^step" $OUT/call${N}_$1.txt | grep "^|\|rc=\|^- "
  { echo; echo "## iterations (bench/gpu/iterations_table.py)"; python3 bench/gpu/iterations_table.py $OUT/call${N}_$1.json 2>&1; } >> $OUT/call${N}_$1.txt
  tar czf $OUT/call${N}_logs.tgz -C /tmp logs 2>/dev/null
}
{ timeout 90 python3 tests/integrations/python/storage_mover_cuda_test.py -v StorageMoverCudaTest.test_streamed_step_bit_identical_and_under_the_limit_at_40_percent 2>&1; echo "rc=$?"; } > $OUT/call${N}_cuda_test.txt
tail -4 $OUT/call${N}_cuda_test.txt
# the pinned pool under a streamed step (call 1: 19-151 MB of new pinned memory every timed iteration): the CUDA
# test's model for 16 iterations at 40%, new pinned bytes per iteration and the pool's buffers by size at the end
python3 - > $OUT/call${N}_pinned.txt 2>&1 <<'PY'
import json, os, subprocess, sys
sys.path[:0] = ["tests/integrations/python"]
import storage_mover_cuda_test as T
src = T.CHILD.replace("for it in range(10):", "for it in range(16):") + """
if tc is not None:
    t = tc.storage_mover().transport
    print("pinned_new", [h["pinned_new"] for h in out["stats"]["iterations"]])
    print("pool", sorted((n, len(v)) for n, v in t._free.items()), "pinned_bytes", t.pinned_bytes)
    print("plan", {k: v for k, v in out["stats"]["plan"].items() if not isinstance(v, (list, dict))})
"""
os.environ["TIERPACK_TEST_GPU"] = "mechanism:storage,step:stream"
def child(budget):
    return subprocess.run([sys.executable, "-c", src, str(budget), "0", "python", T.LIB, "bench/gpu"],
                          capture_output=True, text=True, timeout=120)
ref = child(0)
peak = max(json.loads([l for l in ref.stdout.splitlines() if l.startswith("RESULT ")][0][7:])["peaks"])
p = child(peak * 0.4)
print("\n".join(l for l in p.stdout.splitlines() if not l.startswith("RESULT")))
print(p.stderr[-3000:])
PY
grep "pinned_new\|pool" $OUT/call${N}_pinned.txt | cut -c1-300
run llama default,ckpt,tierpack "" 60 170 "--gpu-options step:stream"
run hf-gpt2 default,ckpt,tierpack "" 60 230 "--gpu-options step:stream"
grep -h "^# \|^| [4-9] \|^| 1[0-8] " $OUT/call${N}_*.txt | cut -c1-110
grep -h "plan from\|passed\|held by\|allocator held\|host's time\|late\|Error\|error" /tmp/logs/*tierpack* | cut -c1-260 | head -40
