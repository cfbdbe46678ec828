#!/bin/bash
# Session 42, device call 6 (commit COMMIT6, the code of COMMIT4): call 5 found ResNet-50 and T5-style fitting 60% of
# compile's peak with compile-0.1 and nothing moved (live peaks 5.19 of 6.63 and 11.74 of 13.69 GiB): the compiler's
# smaller budget 0.5 recomputes less. compile and tierpack+compile-0.5 at 60% of compile's peak. One run per row.
D=bench/results/gpu-h200-2026-12-14-1
N=6
. bench/gpu/device_cells.sh
cell resnet50 resnet50 compile,tierpack+compile-0.5 60 130 step:stream,limit:hard --compile-budgets 60
cell t5 t5 compile,tierpack+compile-0.5 60 230 step:stream,limit:hard --compile-budgets 60
plan_lines
