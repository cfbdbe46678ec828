#!/bin/bash
# Session 42, device call 4 (commit COMMIT4): call 3 again where it failed, and on the models it did not run.
# Call 3's tierpack cells on HF GPT-2 failed: with a graph per block, Dynamo traced tierpack's pack hook in the eager
# code between graphs (the final layer norm) and failed inside it; the mover now pushes its hooks again through
# torch.compiler.disable at the first torch.compile call (StorageMover.shield_from_compiler). Here: HF GPT-2
# (compile, tierpack+compile-0.1 and tierpack+compile at 60% of compile's peak), ResNet-50 and T5-style (compile,
# tierpack+compile-0.1 at 60%). One run per row; the cells CELLS names (default all) within CAP seconds (default 570).
D=bench/results/gpu-h200-2026-12-14-1
N=4
. bench/gpu/device_cells.sh
cell hf-gpt2 hf-gpt2 compile,tierpack+compile-0.1,tierpack+compile 60 260 step:stream,limit:hard --compile-budgets 60
cell resnet50 resnet50 compile,tierpack+compile-0.1 60 130 step:stream,limit:hard --compile-budgets 60
cell t5 t5 compile,tierpack+compile-0.1 60 180 step:stream,limit:hard --compile-budgets 60
plan_lines
