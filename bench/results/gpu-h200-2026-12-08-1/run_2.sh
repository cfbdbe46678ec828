#!/bin/bash
# Session 34, device call 2 (commit COMMIT2, the same runtime as call 1): copies:raw (the default) against
# copies:torch on the Llama-style decoder and Hugging Face GPT-2 large at 75% of the default peak (one run per row;
# the torch rows in a second bench run without the default cell); the T5-style model at 75% with recompute:off and
# limit:hard (copies only, one plan) and one more step under torch.profiler (per-stream busy and idle times: why
# call 1's copying plans took 1.1-1.9 s). First memcheck_remap_probe's new case 8 (a reader launched while its range
# is unmapped, mapped before it runs) with and without memcheck. Everything under /tmp/call2 goes back as call2.tgz.
set -o pipefail
export PYTHONUNBUFFERED=1 TIERPACK_CUDA_LIB=$PWD/.devcarry/lib/libtierpack_cuda.so
D=bench/results/gpu-h200-2026-12-08-1
N=2
O=/tmp/call$N; rm -rf $O /tmp/logs; mkdir -p $O
{ echo "commit $(cat $D/COMMIT$N)"; nvidia-smi --query-gpu=name,driver_version,pcie.link.gen.max,pcie.link.width.max --format=csv,noheader; python3 -c 'import torch, transformers;print("torch",torch.__version__, "transformers", transformers.__version__)'; } > $O/env$N.txt
cat $O/env$N.txt
SAN=$(command -v compute-sanitizer || ls /usr/local/cuda/bin/compute-sanitizer)
{ echo "== probe, plain"; timeout 60 .devcarry/bin/memcheck_remap_probe; echo "rc=$?"
  echo "== probe, memcheck: $SAN --tool memcheck --print-limit 3 memcheck_remap_probe"
  timeout 120 $SAN --tool memcheck --print-limit 3 .devcarry/bin/memcheck_remap_probe 2>&1 | grep -v "Host Frame" | head -80; echo "rc=${PIPESTATUS[0]}"
} > $O/call${N}_probe.txt 2>&1
grep "case 7\|case 8\|ERROR SUMMARY\|Invalid\|rc=" $O/call${N}_probe.txt
run() {  # name model modes budgets timeout [more options]
  timeout $5 python3 bench/gpu/models_bench.py --lib $TIERPACK_CUDA_LIB --steps 4 --warmup 3 --tierpack-warmup 14 --child-timeout 110 \
    --commit $(cat $D/COMMIT$N) --logs /tmp/logs/$1 --models $2 --modes $3 --budgets "$4" $6 \
    --json $O/call${N}_$1.json > $O/call${N}_$1.txt 2>&1
  echo "rc=$?" >> $O/call${N}_$1.txt
  grep -v "^step" $O/call${N}_$1.txt | grep "^| [dt]\|rc=\|^- \|PROFILE" | cut -c1-400
  { echo; echo "## iterations (bench/gpu/iterations_table.py)"; python3 bench/gpu/iterations_table.py $O/call${N}_$1.json 2>&1; } >> $O/call${N}_$1.txt
  tar czf $OUT/call${N}.tgz -C /tmp call$N logs 2>/dev/null
}
run llama llama default,tierpack 75 110
run llama_torch llama tierpack 75 90 "--gpu-options copies:torch"
run hf-gpt2 hf-gpt2 default,tierpack 75 120
run hf-gpt2_torch hf-gpt2 tierpack 75 95 "--gpu-options copies:torch"
run t5_copies t5 tierpack 75 100 "--gpu-options recompute:off,limit:hard --profile summary"
grep -h "plan from\|host's time\|late\|Error\|error" /tmp/logs/*/*tierpack*.log | cut -c1-220 | tail -30
