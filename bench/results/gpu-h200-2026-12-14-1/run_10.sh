#!/bin/bash
# Written in session 43, run in session 44 as call 10 (commit COMMIT10: a tree with d0867ed,
# the idle plan's streamed step). Call 8 again: deterministic losses under torch.compile with tierpack, the
# Llama-style decoder at 60% of compile's peak (call 8's tierpack cell ran out of memory in an unstreamed AdamW step,
# the bug d0867ed fixes); then run_9.sh's HF GPT-2 large under plain compile, where the plan copies ~12 GB each way.
# compile-0.1/blocks (compile/blocks) runs once: call 8 found two deterministic runs equal bit for bit.
D=bench/results/gpu-h200-2026-12-14-1
N=10
. bench/gpu/device_cells.sh
cell llama llama compile,compile-0.1/blocks,tierpack+compile-0.1 60 260 step:stream,limit:hard --compile-budgets 60 --deterministic
cell hf-gpt2 hf-gpt2 compile,compile/blocks,tierpack+compile 60 300 step:stream,limit:hard --compile-budgets 60 --deterministic
plan_lines
