#!/bin/bash
# Session 32, device call 3 (commit COMMIT3): call 2's Llama-style run held 13.3 GiB of an 11.0 GiB budget (the
# streamed step's state storages, freed and allocated again each step, fragment the allocator: 2.9 GiB over its live
# bytes) and GPT-2 large fitted no plan (autocast's cache holds 1.44 GiB of casts through forward). Here both at 60%
# of checkpointing's NVML peak with step:stream, limit:hard (the allocator gives its cached pages back at the
# budget) and autocast_cache:off (new: casts are saved storages the plan may let go in forward), beside
# checkpointing and the default; the CUDA tests of a streamed step at 40% (soft limit) and of 50%.
export PYTHONUNBUFFERED=1 TIERPACK_CUDA_LIB=$PWD/.devcarry/lib/libtierpack_cuda.so
D=bench/results/gpu-h200-2026-12-06-1
N=3
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
{ timeout 150 python3 tests/integrations/python/storage_mover_cuda_test.py -v StorageMoverCudaTest.test_streamed_step_bit_identical_and_under_the_limit_at_40_percent StorageMoverCudaTest.test_bit_identical_and_under_the_limit_at_50_percent 2>&1; echo "rc=$?"; } > $OUT/call${N}_cuda_test.txt
tail -4 $OUT/call${N}_cuda_test.txt
O="--gpu-options step:stream,limit:hard,autocast_cache:off"
run llama ckpt,tierpack "" 60 170 "$O"
run hf-gpt2 ckpt,tierpack "" 60 220 "$O"
grep -h "^# \|^| [4-9] \|^| 1[0-8] " $OUT/call${N}_*.txt | cut -c1-110
grep -h "plan from\|passed\|held by\|allocator held\|host's time\|late\|Error\|error" /tmp/logs/*tierpack* | cut -c1-260 | head -40
