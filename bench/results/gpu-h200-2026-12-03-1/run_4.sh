#!/bin/bash
# Session 29, device call 4 (commit COMMIT4): the hooks' host time is measured in a plan's second iteration with no
# new pinned memory (call 3 measured the first, which grew the pinned pool: ~3 ms a copy). The T5-style
# encoder-decoder, the Llama-style decoder and Hugging Face GPT-2 large: default and tierpack at 75% of the
# default's NVML peak.
export PYTHONUNBUFFERED=1 TIERPACK_CUDA_LIB=$PWD/.devcarry/lib/libtierpack_cuda.so
D=bench/results/gpu-h200-2026-12-03-1
rm -rf /tmp/logs
echo "commit $(cat $D/COMMIT4)" > $OUT/env4.txt
for m in t5 llama hf-gpt2; do
  timeout 130 python3 bench/gpu/models_bench.py --lib $TIERPACK_CUDA_LIB --steps 4 --warmup 3 --tierpack-warmup 14 --child-timeout 90 \
    --commit $(cat $D/COMMIT4) --logs /tmp/logs --models $m --modes default,tierpack --budgets 75 \
    --json $OUT/call4_$m.json > $OUT/call4_$m.txt 2>&1
  echo "rc=$?" >> $OUT/call4_$m.txt
  grep -v "^step" $OUT/call4_$m.txt | grep "^|\|rc=\|^- "
  tar czf $OUT/call4_logs.tgz -C /tmp logs 2>/dev/null
done
grep -h "plan from\|held\|host's time\|Error\|error" /tmp/logs/*tierpack* | cut -c1-240 | head -30
