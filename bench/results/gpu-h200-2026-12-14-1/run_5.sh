#!/bin/bash
# Session 42, device call 5 (commit COMMIT5, the code of COMMIT4): the models call 4 had no time left for, under
# torch.compile with a graph per block: ResNet-50 and T5-style (compile, tierpack+compile-0.1 at 60% of compile's
# peak). One run per row; the cells CELLS names (default all) within CAP seconds (default 570).
D=bench/results/gpu-h200-2026-12-14-1
N=5
. bench/gpu/device_cells.sh
cell resnet50 resnet50 compile,tierpack+compile-0.1 60 170 step:stream,limit:hard --compile-budgets 60
cell t5 t5 compile,tierpack+compile-0.1 60 300 step:stream,limit:hard --compile-budgets 60
plan_lines
