#!/bin/bash
# Session 41, device call 1 (commit COMMIT1): tierpack under torch.compile at 60% of compile's own peak with the
# compiler's activation memory budget 0.1 (tierpack+compile-0.1: the compiler recomputes more than at 0.5, so
# tierpack copies less out). Call 4 of gpu-h200-2026-12-13-1 ran GPT-2 with budget 0.5 at 241.2 ms, 1.81x compile's
# step, 0.71 of a 171.4 ms transfer bound that is itself 1.29x compile's step: issue 23's <= 1.3x needs fewer bytes
# over PCIe. One run per row; the cells CELLS names (default all) within CAP seconds (default 570).
D=bench/results/gpu-h200-2026-12-14-1
N=1
. bench/gpu/device_cells.sh
cell hf-gpt2 hf-gpt2 compile,compile-0.1,tierpack+compile-0.1 60 300 step:stream,limit:hard --compile-budgets 60
cell llama llama compile,compile-0.1,tierpack+compile-0.1 60 240 step:stream,limit:hard --compile-budgets 60
plan_lines
