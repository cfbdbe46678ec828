#!/bin/bash
# Session 43, device call 9 (commit COMMIT9), NOT RUN (device time spent; its cells are in run_10.sh): losses under torch.compile with many copies, deterministic kernels.
# HF GPT-2 large under plain compile (no compiler budget) at 60% of compile's peak: call 4 copied 11.82 GB each way.
# compile/blocks runs twice (does compile itself repeat bit for bit?); tierpack+compile's losses are compared with
# the first (models_bench.loss_base). One run per row; the cells CELLS names within CAP seconds.
D=bench/results/gpu-h200-2026-12-14-1
N=9
. bench/gpu/device_cells.sh
cell hf-gpt2 hf-gpt2 compile,compile/blocks,compile/blocks,tierpack+compile 60 230 step:stream,limit:hard --compile-budgets 60 --deterministic
plan_lines
