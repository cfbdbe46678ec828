#!/bin/bash
# Session 33, device call 5 (commit COMMIT5: memcheck_remap_probe gains case 6, the gate closed as
# CudaVmmBackend::close_gate closes it behind 200 queued readers of the chunk): the probe with and without memcheck,
# then GroupMoverTest/cuda.HiddenKernelDuringMovesNeverFaults under memcheck once more, printing its first errors;
# the T5-style model at 75% of the default peak with the default (soft) limit, which now lowers the plan's limit by
# half of ROOM_FRACTION of the budget at least for memory the allocator holds over it (call 2: four replans for
# 0.02-1.35 GiB over, into the timed iterations, 1102.6 ms).
export PYTHONUNBUFFERED=1 TIERPACK_CUDA_LIB=$PWD/.devcarry/lib/libtierpack_cuda.so
D=bench/results/gpu-h200-2026-12-07-1
N=5
{ echo "commit $(cat $D/COMMIT$N)"; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; } > $OUT/env$N.txt
SAN=$(command -v compute-sanitizer || ls /usr/local/cuda/bin/compute-sanitizer)
{ echo "== probe, plain"; timeout 60 .devcarry/bin/memcheck_remap_probe; echo "rc=$?"
  echo "== probe, memcheck: $SAN --tool memcheck --print-limit 3 memcheck_remap_probe"
  timeout 120 $SAN --tool memcheck --print-limit 3 .devcarry/bin/memcheck_remap_probe 2>&1 | head -80; echo "rc=${PIPESTATUS[0]}"
  echo "== TIERPACK_STRESS_ROUNDS=8 $SAN --tool memcheck --print-limit 2 gpu_migrate_tests --gtest_filter='*cuda.HiddenKernel*'"
  TIERPACK_STRESS_ROUNDS=8 timeout 40 $SAN --tool memcheck --print-limit 2 .devcarry/tests/gpu_migrate_tests --gtest_filter='*cuda.HiddenKernel*' 2>&1 | grep -vE "Host Frame" | head -40; echo "rc=${PIPESTATUS[0]}"
} > $OUT/call${N}_probe.txt 2>&1
cat $OUT/call${N}_probe.txt
rm -rf /tmp/logs
timeout 120 python3 bench/gpu/models_bench.py --lib $TIERPACK_CUDA_LIB --steps 4 --warmup 3 --tierpack-warmup 14 --child-timeout 100 \
  --commit $(cat $D/COMMIT$N) --logs /tmp/logs --models t5 --modes default,tierpack --budgets 75 --json $OUT/call${N}_t5.json > $OUT/call${N}_t5.txt 2>&1
echo "rc=$?" >> $OUT/call${N}_t5.txt
grep -v "^step" $OUT/call${N}_t5.txt | grep "^|\|rc=\|^- "
{ echo; echo "## iterations (bench/gpu/iterations_table.py)"; python3 bench/gpu/iterations_table.py $OUT/call${N}_t5.json 2>&1; } >> $OUT/call${N}_t5.txt
tar czf $OUT/call${N}_logs.tgz -C /tmp logs 2>/dev/null
grep -h "plan from\|allocator held" /tmp/logs/*tierpack*.log | cut -c1-160
