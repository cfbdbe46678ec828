#!/bin/bash
# Session 33, device call 2 (commit COMMIT2: the streamed step copies each state out into the pinned buffer it came
# in from, and chunks nothing when no state is away; memcheck_remap_probe gains case 3, the gate as tierpack closes
# it): the probe with and without memcheck; three CUDA tests of the storage mover (the streamed step at 40%, and
# Hugging Face's checkpointing, the one call 4 of gpu-h200-2026-12-06-1 did not run); the Llama-style decoder and
# the T5-style model at 75% of the default peak and (Llama) at checkpointing's peak, with the default options
# (autocast_cache:off since gpu-h200-2026-12-06-1).
set -o pipefail
export PYTHONUNBUFFERED=1 TIERPACK_CUDA_LIB=$PWD/.devcarry/lib/libtierpack_cuda.so
D=bench/results/gpu-h200-2026-12-07-1
N=2
rm -rf /tmp/logs
{ echo "commit $(cat $D/COMMIT$N)"; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; python3 -c 'import torch, transformers;print("torch",torch.__version__, "transformers", transformers.__version__)'; } > $OUT/env$N.txt
cat $OUT/env$N.txt
SAN=$(command -v compute-sanitizer || ls /usr/local/cuda/bin/compute-sanitizer)
{ echo "== probe, plain"; timeout 30 .devcarry/bin/memcheck_remap_probe; echo "rc=$?"
  echo "== probe, memcheck: $SAN --tool memcheck --print-limit 3 memcheck_remap_probe"
  timeout 90 $SAN --tool memcheck --print-limit 3 .devcarry/bin/memcheck_remap_probe 2>&1 | head -60; echo "rc=${PIPESTATUS[0]}"
} > $OUT/call${N}_probe.txt 2>&1
cat $OUT/call${N}_probe.txt
{ timeout 150 python3 tests/integrations/python/storage_mover_cuda_test.py -v StorageMoverCudaTest.test_streamed_step_bit_identical_and_under_the_limit_at_40_percent StorageMoverCudaTest.test_hugging_face_gradient_checkpointing_makes_progress StorageMoverCudaTest.test_hugging_face_blocks_run_again_bit_identical 2>&1; echo "rc=$?"; } > $OUT/call${N}_cuda_test.txt
tail -6 $OUT/call${N}_cuda_test.txt
run() {  # model modes budgets at-ckpt-budgets timeout [more options]
  timeout $5 python3 bench/gpu/models_bench.py --lib $TIERPACK_CUDA_LIB --steps 4 --warmup 3 --tierpack-warmup 14 --child-timeout 100 \
    --commit $(cat $D/COMMIT$N) --logs /tmp/logs --models $1 --modes $2 --budgets "$3" ${4:+--at-ckpt-budgets $4} $6 \
    --json $OUT/call${N}_$1.json > $OUT/call${N}_$1.txt 2>&1
  echo "rc=$?" >> $OUT/call${N}_$1.txt
  grep -v "^step" $OUT/call${N}_$1.txt | grep "^|\|rc=\|^- "
  { echo; echo "## iterations (bench/gpu/iterations_table.py)"; python3 bench/gpu/iterations_table.py $OUT/call${N}_$1.json 2>&1; } >> $OUT/call${N}_$1.txt
  tar czf $OUT/call${N}_logs.tgz -C /tmp logs 2>/dev/null
}
run llama default,ckpt,tierpack 75 100 230
run t5 default,tierpack 75 "" 160
grep -h "plan from\|passed\|held by\|allocator held\|host's time\|late\|Error\|error" /tmp/logs/*tierpack* | cut -c1-260 | head -40
