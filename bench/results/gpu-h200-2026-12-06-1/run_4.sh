#!/bin/bash
# Session 32, device call 4 (commit COMMIT4: call 3's code with autocast_cache:off the default, and the streamed
# step's window counting a fourth chunk for the update's temporaries): every CUDA test of the
# storage mover (a plan's first iteration now counts its peaks from its first call, a lowered limit may rise again,
# autocast keeps no cache of casts: these touch every run), all but the Hugging Face checkpointing one (the device
# time left after refused starts allowed no more).
export PYTHONUNBUFFERED=1 TIERPACK_CUDA_LIB=$PWD/.devcarry/lib/libtierpack_cuda.so
D=bench/results/gpu-h200-2026-12-06-1
N=4
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
{ timeout 170 python3 tests/integrations/python/storage_mover_cuda_test.py -v StorageMoverCudaTest.test_bit_identical_and_under_the_limit_at_70_percent StorageMoverCudaTest.test_bit_identical_and_under_the_limit_at_50_percent StorageMoverCudaTest.test_streamed_step_bit_identical_and_under_the_limit_at_40_percent StorageMoverCudaTest.test_under_checkpointing StorageMoverCudaTest.test_hugging_face_blocks_run_again_bit_identical 2>&1; echo "rc=$?"; } > $OUT/call${N}_cuda_test.txt
tail -4 $OUT/call${N}_cuda_test.txt
grep -h "^# \|^| [4-9] \|^| 1[0-8] " $OUT/call${N}_*.txt | cut -c1-110
grep -h "plan from\|passed\|held by\|allocator held\|host's time\|late\|Error\|error" /tmp/logs/*tierpack* | cut -c1-260 | head -40
