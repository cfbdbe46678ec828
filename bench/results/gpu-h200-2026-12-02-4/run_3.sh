#!/bin/bash
# Session 28, device call 3 (commit COMMIT3): Python's collector frozen at the end of the recorded iteration (Note
# [Python's collector]), nested recomputations timed once. The CUDA test of blocks run again (Hugging Face GPT-2,
# deterministic kernels, 45% of its peak), then the T5-style encoder-decoder and ResNet-50 (default, checkpointing,
# tierpack at 75% of the default's NVML peak and at checkpointing's peak), then GPT-2 large at 75% again.
export PYTHONUNBUFFERED=1 TIERPACK_CUDA_LIB=$PWD/.devcarry/lib/libtierpack_cuda.so
D=bench/results/gpu-h200-2026-12-02-4
{ echo "commit $(cat $D/COMMIT3)"; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; python3 -c 'import torch, transformers;print("torch",torch.__version__, "transformers", transformers.__version__)'; } > $OUT/env3.txt
{ timeout 100 python3 tests/integrations/python/storage_mover_cuda_test.py -v StorageMoverCudaTest.test_hugging_face_blocks_run_again_bit_identical 2>&1; echo "rc=$?"; } > $OUT/call3_cuda_test.txt
tail -5 $OUT/call3_cuda_test.txt | cut -c1-600
timeout 300 python3 bench/gpu/models_bench.py --lib $TIERPACK_CUDA_LIB --steps 4 --warmup 3 --tierpack-warmup 14 --child-timeout 100 \
  --commit $(cat $D/COMMIT3) --logs /tmp/logs --models t5,resnet50 --modes default,ckpt,tierpack --budgets 75 --at-ckpt-budgets 100 \
  --json $OUT/call3_models.json > $OUT/call3_bench.txt 2>&1
echo "rc=$?" >> $OUT/call3_bench.txt
grep -v "^step" $OUT/call3_bench.txt | grep "^|\|^#\|rc=\|^- "
timeout 140 python3 bench/gpu/models_bench.py --lib $TIERPACK_CUDA_LIB --steps 4 --warmup 3 --tierpack-warmup 14 --child-timeout 100 \
  --commit $(cat $D/COMMIT3) --logs /tmp/logs --models hf-gpt2 --modes default,tierpack --budgets 75 \
  --json $OUT/call3_gpt2.json > $OUT/call3_gpt2.txt 2>&1
echo "rc=$?" >> $OUT/call3_gpt2.txt
tar czf $OUT/call3_logs.tgz -C /tmp logs 2>/dev/null
grep -v "^step" $OUT/call3_gpt2.txt | grep "^|\|^#\|rc=\|^- "
grep -h "plan from\|held\|made .* again in\|scaled\|blocks that\|Error\|error\|freeze" /tmp/logs/*tierpack* | cut -c1-200 | head -30
