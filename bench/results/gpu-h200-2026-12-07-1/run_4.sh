#!/bin/bash
# Session 33, device call 4 (commit COMMIT4: a recomputation timed in an iteration that took new pinned memory no
# longer scales the recipes, the next iteration is timed instead; memcheck_remap_probe gains case 5, an eviction's
# remap from a device to a host handle behind a host-word wait): the probe with and without memcheck; the Llama-style
# decoder at 60% of checkpointing's peak with step:stream,limit:hard (call 3: scaled by its first iteration's times,
# 10.54x, the plan moved 8.59 GiB each way, 440.6 ms); Hugging Face GPT-2 large at 75% of the default peak and at
# checkpointing's peak, default options.
set -o pipefail
export PYTHONUNBUFFERED=1 TIERPACK_CUDA_LIB=$PWD/.devcarry/lib/libtierpack_cuda.so
D=bench/results/gpu-h200-2026-12-07-1
N=4
rm -rf /tmp/logs
{ echo "commit $(cat $D/COMMIT$N)"; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; python3 -c 'import torch, transformers;print("torch",torch.__version__, "transformers", transformers.__version__)'; } > $OUT/env$N.txt
cat $OUT/env$N.txt
SAN=$(command -v compute-sanitizer || ls /usr/local/cuda/bin/compute-sanitizer)
{ echo "== probe, plain"; timeout 30 .devcarry/bin/memcheck_remap_probe; echo "rc=$?"
  echo "== probe, memcheck: $SAN --tool memcheck --print-limit 3 memcheck_remap_probe"
  timeout 90 $SAN --tool memcheck --print-limit 3 .devcarry/bin/memcheck_remap_probe 2>&1 | head -60; echo "rc=${PIPESTATUS[0]}"
} > $OUT/call${N}_probe.txt 2>&1
cat $OUT/call${N}_probe.txt
run() {  # model modes budgets at-ckpt-budgets timeout [more options] [name suffix]
  timeout $5 python3 bench/gpu/models_bench.py --lib $TIERPACK_CUDA_LIB --steps 4 --warmup 3 --tierpack-warmup 14 --child-timeout 100 \
    --commit $(cat $D/COMMIT$N) --logs /tmp/logs/$1$7 --models $1 --modes $2 --budgets "$3" ${4:+--at-ckpt-budgets $4} $6 \
    --json $OUT/call${N}_$1$7.json > $OUT/call${N}_$1$7.txt 2>&1
  echo "rc=$?" >> $OUT/call${N}_$1$7.txt
  grep -v "^step" $OUT/call${N}_$1$7.txt | grep "^|\|rc=\|^- "
  { echo; echo "## iterations (bench/gpu/iterations_table.py)"; python3 bench/gpu/iterations_table.py $OUT/call${N}_$1$7.json 2>&1; } >> $OUT/call${N}_$1$7.txt
  tar czf $OUT/call${N}_logs.tgz -C /tmp logs 2>/dev/null
}
run llama ckpt,tierpack "" 60 170 "--gpu-options step:stream,limit:hard" _stream60
run hf-gpt2 default,ckpt,tierpack 75 100 300 "" ""
grep -rh "plan from\|passed\|held by\|allocator held\|host's time\|made\|scaled\|Error\|error" /tmp/logs/ | cut -c1-220 | head -40
