#!/bin/bash
# Session 33, device call 3 (commit COMMIT3: memcheck_remap_probe gains case 4, a HOST_NUMA chunk mapped for the
# device, as the VMM mechanism maps an evicted chunk): the probe with and without memcheck; the Llama-style decoder and
# the T5-style model at 75% of the default peak with limit:hard (call 2 ran them with the soft limit: the plans were
# made again and again as PyTorch's allocator held 3-4 GiB over live bytes); the Llama-style decoder at 60% of
# checkpointing's peak with step:stream,limit:hard (the streamed step now copies each state out into its own pinned
# buffer: new pinned MB per step is in each tierpack row's line).
set -o pipefail
export PYTHONUNBUFFERED=1 TIERPACK_CUDA_LIB=$PWD/.devcarry/lib/libtierpack_cuda.so
D=bench/results/gpu-h200-2026-12-07-1
N=3
rm -rf /tmp/logs
{ echo "commit $(cat $D/COMMIT$N)"; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; python3 -c 'import torch, transformers;print("torch",torch.__version__, "transformers", transformers.__version__)'; } > $OUT/env$N.txt
cat $OUT/env$N.txt
SAN=$(command -v compute-sanitizer || ls /usr/local/cuda/bin/compute-sanitizer)
{ echo "== probe, plain"; timeout 30 .devcarry/bin/memcheck_remap_probe; echo "rc=$?"
  echo "== probe, memcheck: $SAN --tool memcheck --print-limit 3 memcheck_remap_probe"
  timeout 90 $SAN --tool memcheck --print-limit 3 .devcarry/bin/memcheck_remap_probe 2>&1 | head -60; echo "rc=${PIPESTATUS[0]}"
} > $OUT/call${N}_probe.txt 2>&1
cat $OUT/call${N}_probe.txt
run() {  # model modes budgets at-ckpt-budgets timeout [more options]
  timeout $5 python3 bench/gpu/models_bench.py --lib $TIERPACK_CUDA_LIB --steps 4 --warmup 3 --tierpack-warmup 14 --child-timeout 100 \
    --commit $(cat $D/COMMIT$N) --logs /tmp/logs/$1$7 --models $1 --modes $2 --budgets "$3" ${4:+--at-ckpt-budgets $4} $6 \
    --json $OUT/call${N}_$1$7.json > $OUT/call${N}_$1$7.txt 2>&1
  echo "rc=$?" >> $OUT/call${N}_$1$7.txt
  grep -v "^step" $OUT/call${N}_$1$7.txt | grep "^|\|rc=\|^- "
  { echo; echo "## iterations (bench/gpu/iterations_table.py)"; python3 bench/gpu/iterations_table.py $OUT/call${N}_$1$7.json 2>&1; } >> $OUT/call${N}_$1$7.txt
  tar czf $OUT/call${N}_logs.tgz -C /tmp logs 2>/dev/null
}
run llama default,tierpack 75 "" 150 "--gpu-options limit:hard" _hard75
run t5 default,tierpack 75 "" 170 "--gpu-options limit:hard" _hard75
run llama ckpt,tierpack "" 60 170 "--gpu-options step:stream,limit:hard" _stream60
grep -rh "plan from\|passed\|held by\|allocator held\|host's time\|late\|Error\|error" /tmp/logs/ | cut -c1-200 | head -30
