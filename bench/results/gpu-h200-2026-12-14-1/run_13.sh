#!/bin/bash
# Session 45, device call 13, run in session 46 (COMMIT13: a62b64d): the allocator's retries under limit:hard (Note [Allocator retries] in
# python/tierpack/reserved_memory.py). Call 11 found GPT-2 large's checkpointed step under tierpack at 60% retrying
# an allocation at the loss in every step (~27 ms of host and GPU time, not in the cost model). Now each iteration
# counts the retries and a planned iteration with any puts a plan under a lower limit on trial against the plan in
# force (Note [Measured plans]); models_bench counts the retries of the timed steps. The cells: GPT-2 under
# checkpointing with and without tierpack at 60% (26 warm-up steps, for the trials), the same at fill 0.80 (a lower
# limit from the start, for comparison), then T5 and the Llama-style decoder. CAP and CELLS as in device_cells.sh.
D=bench/results/gpu-h200-2026-12-14-1
N=13
. bench/gpu/device_cells.sh
cell hf-gpt2 hf-gpt2 ckpt,tierpack+ckpt 60 260 step:stream,limit:hard --ckpt-budgets 60 --tierpack-warmup 26
cell hf-gpt2-fill hf-gpt2 tierpack+ckpt 60 150 step:stream,limit:hard,fill:0.80 --ckpt-budgets 60 --tierpack-warmup 26
cell t5 t5 ckpt,tierpack+ckpt 60 260 step:stream,limit:hard --ckpt-budgets 60 --tierpack-warmup 26
cell llama llama ckpt,tierpack+ckpt 60 200 step:stream,limit:hard --ckpt-budgets 60 --tierpack-warmup 26
for f in $O/call${N}_*.txt; do grep -h "retried\|Allocator retries\|Measured plans" $f | cut -c1-260; done
ls -la $OUT
plan_lines 40
grep -h "Allocator retries\|Measured plans" /tmp/logs/*/*tierpack*.log | cut -c1-260 | tail -20
