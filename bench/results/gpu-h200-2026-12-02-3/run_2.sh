#!/bin/bash
# Session 27, device call 2 (commit COMMIT2): keep, offload or recompute chosen by cost (Note [Recompute cost] in
# placer/saved_plan.cpp). Hugging Face GPT-2 large and the Llama-style decoder: default, checkpointing, tierpack
# (limit:soft) at 75% of the default's NVML peak and at checkpointing's peak; 14 warm-up steps for tierpack so the
# timed steps come after the soft limit's replans (call 1 timed some of them). One more step per tierpack cell
# is recorded by the allocator and read by bench/gpu/fragmentation.py (what the allocator maps beyond live bytes).
export PYTHONUNBUFFERED=1 TIERPACK_CUDA_LIB=$PWD/.devcarry/lib/libtierpack_cuda.so
D=bench/results/gpu-h200-2026-12-02-3
{ echo "commit $(cat $D/COMMIT2)"; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; python3 -c 'import torch, transformers;print("torch",torch.__version__, "transformers", transformers.__version__)'; } > $OUT/env2.txt
mkdir -p /tmp/snap
timeout 500 python3 bench/gpu/models_bench.py --lib $TIERPACK_CUDA_LIB --steps 4 --warmup 3 --tierpack-warmup 14 --child-timeout 130 \
  --commit $(cat $D/COMMIT2) --logs /tmp/logs --models hf-gpt2,llama --modes default,ckpt,tierpack --budgets 75 --at-ckpt-budgets 100 \
  --snapshot /tmp/snap/s --json $OUT/call2_models.json > $OUT/call2_bench.txt 2>&1
echo "rc=$?" >> $OUT/call2_bench.txt
for f in /tmp/snap/*.pickle; do echo "== $f"; python3 bench/gpu/fragmentation.py $f; done > $OUT/call2_fragmentation.txt 2>&1
tar czf $OUT/call2_logs.tgz -C /tmp logs 2>/dev/null
grep -v "^step" $OUT/call2_bench.txt | grep "^|\|^#\|rc="
grep -h "modules run again\|plan from\|held" /tmp/logs/*tierpack* | cut -c1-250 | head -24
cat $OUT/call2_fragmentation.txt
