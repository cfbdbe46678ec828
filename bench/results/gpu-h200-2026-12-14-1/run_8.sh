#!/bin/bash
# Session 43, device call 8 (commit COMMIT8): are the losses under torch.compile bit-identical with tierpack, with
# deterministic kernels? Llama-style decoder at 60% of compile's peak with the compiler's budget 0.1 (call 3: the
# mover streamed the optimizer step and copied 0.20 GB each way). compile-0.1/blocks runs twice: the second run's
# losses against the first say whether compile itself repeats bit for bit; tierpack+compile-0.1's are compared with
# the first (models_bench.loss_base). One run per row; the cells CELLS names within CAP seconds.
D=bench/results/gpu-h200-2026-12-14-1
N=8
. bench/gpu/device_cells.sh
cell llama llama compile,compile-0.1/blocks,compile-0.1/blocks,tierpack+compile-0.1 60 260 step:stream,limit:hard --compile-budgets 60 --deterministic
plan_lines
