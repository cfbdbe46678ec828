#!/bin/bash
# Session 27, device call 1 (commit COMMIT): where the step goes. The storage mover's CUDA test (the planner's
# copies-first fallback at 50%, not run on the H200 before); Hugging Face GPT-2 large and the Llama-style decoder at
# 75% of the default's NVML peak under limit:soft, GPT-2 also under limit:hard, each with one more step under
# torch.profiler (--profile summary: the compute stream's idle gaps, top kernels, host CUDA calls).
export PYTHONUNBUFFERED=1 TIERPACK_CUDA_LIB=$PWD/.devcarry/lib/libtierpack_cuda.so
D=bench/results/gpu-h200-2026-12-02-3
{ echo "commit $(cat $D/COMMIT)"; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; python3 -c 'import torch, transformers;print("torch",torch.__version__, "transformers", transformers.__version__)'; } > $OUT/env1.txt
{ timeout 170 python3 tests/integrations/python/storage_mover_cuda_test.py -v 2>&1; echo "rc=$?"; } > $OUT/call1_cuda_test.txt
tail -5 $OUT/call1_cuda_test.txt
B="python3 bench/gpu/models_bench.py --lib $TIERPACK_CUDA_LIB --steps 4 --warmup 2 --tierpack-warmup 8 --child-timeout 100 --commit $(cat $D/COMMIT) --profile summary"
timeout 200 $B --logs /tmp/logs/soft --models hf-gpt2,llama --modes default,tierpack --budgets 75 --json $OUT/call1_soft.json > $OUT/call1_soft.txt 2>&1
echo "rc=$?" >> $OUT/call1_soft.txt
timeout 130 $B --logs /tmp/logs/hard --models hf-gpt2 --modes default,tierpack --budgets 75 --gpu-options limit:hard --json $OUT/call1_hard.json > $OUT/call1_hard.txt 2>&1
echo "rc=$?" >> $OUT/call1_hard.txt
tar czf $OUT/call1_logs.tgz -C /tmp logs 2>/dev/null
grep -v "^step" $OUT/call1_soft.txt $OUT/call1_hard.txt | grep "|\|rc="
grep -h "modules run again\|plan from\|held" /tmp/logs/*/*tierpack* | cut -c1-300 | head -20
