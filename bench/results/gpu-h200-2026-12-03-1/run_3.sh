#!/bin/bash
# Session 29, device call 3 (commit COMMIT3): the cost model counts the hooks' host time (Note [Host time] in
# placer/saved_plan.cpp: the timed iteration's host time per call, the first planned iteration's host time per copy
# and per recomputation, each block's launch), and the plan is made again with it; the compute stream is found by
# its raw handle. Two of the storage mover's CUDA tests, then the T5-style encoder-decoder and the Llama-style
# decoder: default, checkpointing, tierpack at 75% of the default's NVML peak and at checkpointing's peak.
export PYTHONUNBUFFERED=1 TIERPACK_CUDA_LIB=$PWD/.devcarry/lib/libtierpack_cuda.so
D=bench/results/gpu-h200-2026-12-03-1
rm -rf /tmp/logs /tmp/logs2
{ echo "commit $(cat $D/COMMIT3)"; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; python3 -c 'import torch, transformers;print("torch",torch.__version__, "transformers", transformers.__version__)'; } > $OUT/env3.txt
{ timeout 90 python3 tests/integrations/python/storage_mover_cuda_test.py -v StorageMoverCudaTest.test_bit_identical_and_under_the_limit_at_50_percent StorageMoverCudaTest.test_hugging_face_blocks_run_again_bit_identical 2>&1; echo "rc=$?"; } > $OUT/call3_cuda_test.txt
tail -3 $OUT/call3_cuda_test.txt
timeout 440 python3 bench/gpu/models_bench.py --lib $TIERPACK_CUDA_LIB --steps 4 --warmup 3 --tierpack-warmup 14 --child-timeout 100 \
  --commit $(cat $D/COMMIT3) --logs /tmp/logs --models t5,llama --modes default,ckpt,tierpack --budgets 75 --at-ckpt-budgets 100 \
  --json $OUT/call3_models.json > $OUT/call3_bench.txt 2>&1
echo "rc=$?" >> $OUT/call3_bench.txt
tar czf $OUT/call3_logs.tgz -C /tmp logs 2>/dev/null
grep -v "^step" $OUT/call3_bench.txt | grep "^|\|^#\|rc=\|^- "
grep -h "plan from\|held\|host's time\|blocks that\|Error\|error" /tmp/logs/*tierpack* | cut -c1-240 | head -40
