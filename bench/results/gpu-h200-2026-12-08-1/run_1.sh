#!/bin/bash
# Session 34, device call 1 (commit COMMIT1): memcheck_remap_probe with case 7 (every handle mapped twice, a shadow
# address and the chunk's, 40 cycles, as migrate/gpu/handle_pool.hpp maps them) with and without memcheck; raw
# copies (Note [Raw copies]: copies:raw, new, the default): StorageCopies' CUDA tests, storage_copy_bench.py (torch's
# calls against raw, bandwidth and host time per copy), the six CUDA tests of the storage mover (also the first run
# of session 33's recalibration and soft-limit changes on CUDA); the T5-style model at 75% of the default peak with
# the default options, each cell with one more step under cProfile (models_bench --profile python).
set -o pipefail
export PYTHONUNBUFFERED=1 TIERPACK_CUDA_LIB=$PWD/.devcarry/lib/libtierpack_cuda.so
D=bench/results/gpu-h200-2026-12-08-1
N=1
rm -rf /tmp/logs
{ echo "commit $(cat $D/COMMIT$N)"; nvidia-smi --query-gpu=name,driver_version,pcie.link.gen.max,pcie.link.width.max --format=csv,noheader; python3 -c 'import torch, transformers;print("torch",torch.__version__, "transformers", transformers.__version__)'; } > $OUT/env$N.txt
cat $OUT/env$N.txt
SAN=$(command -v compute-sanitizer || ls /usr/local/cuda/bin/compute-sanitizer)
{ echo "== probe, plain"; timeout 60 .devcarry/bin/memcheck_remap_probe; echo "rc=$?"
  echo "== probe, memcheck: $SAN --tool memcheck --print-limit 3 memcheck_remap_probe"
  timeout 120 $SAN --tool memcheck --print-limit 3 .devcarry/bin/memcheck_remap_probe 2>&1 | grep -v "Host Frame" | head -80; echo "rc=${PIPESTATUS[0]}"
} > $OUT/call${N}_probe.txt 2>&1
cat $OUT/call${N}_probe.txt
{ timeout 60 .devcarry/tests/gpu_migrate_tests --gtest_filter='StorageCopies*' 2>&1 | tail -15; echo "rc=$?"; } > $OUT/call${N}_storage_copies_test.txt
tail -3 $OUT/call${N}_storage_copies_test.txt
timeout 150 python3 bench/gpu/storage_copy_bench.py --repeats 10 --lib $TIERPACK_CUDA_LIB --json $OUT/call${N}_copies.json > $OUT/call${N}_copies.txt 2>&1; echo "rc=$?" >> $OUT/call${N}_copies.txt
cat $OUT/call${N}_copies.txt
{ timeout 170 python3 tests/integrations/python/storage_mover_cuda_test.py -v 2>&1; echo "rc=$?"; } > $OUT/call${N}_cuda_test.txt
tail -12 $OUT/call${N}_cuda_test.txt
run() {  # model modes budgets at-ckpt-budgets timeout [more options]
  timeout $5 python3 bench/gpu/models_bench.py --lib $TIERPACK_CUDA_LIB --steps 4 --warmup 3 --tierpack-warmup 14 --child-timeout 100 \
    --commit $(cat $D/COMMIT$N) --logs /tmp/logs --models $1 --modes $2 --budgets "$3" ${4:+--at-ckpt-budgets $4} $6 \
    --json $OUT/call${N}_$1.json > $OUT/call${N}_$1.txt 2>&1
  echo "rc=$?" >> $OUT/call${N}_$1.txt
  grep -v "^step" $OUT/call${N}_$1.txt | grep "^|\|rc=\|^- "
  { echo; echo "## iterations (bench/gpu/iterations_table.py)"; python3 bench/gpu/iterations_table.py $OUT/call${N}_$1.json 2>&1; } >> $OUT/call${N}_$1.txt
  tar czf $OUT/call${N}_logs.tgz -C /tmp logs 2>/dev/null
}
run t5 default,tierpack 75 "" 170 "--profile python"
for f in /tmp/logs/t5_*.log; do echo "== $f"; sed -n '/python profile/,$p' $f | head -95; done > $OUT/call${N}_t5_profile.txt
grep -h "plan from\|passed\|held by\|allocator held\|host's time\|late\|Error\|error" /tmp/logs/*tierpack* | cut -c1-260 | head -40
