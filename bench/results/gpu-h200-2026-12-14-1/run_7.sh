#!/bin/bash
# Written in session 42, NOT YET RUN (commit COMMIT7, to be written from the tree that runs it). T5-style under
# torch.compile at 60% of compile's peak: compile-0.1 with a graph per block fit with nothing moved (call 5: 159.2
# ms, 1.33x compile, live peak 11.74 of 13.69 GiB), compile-0.5 had to copy 2.14 GB and was host-bound (call 6: 210.6
# ms). Budget 0.3 recomputes less than 0.1 and may fit without copies. Also compile-0.1 whole and split without
# tierpack (what the split costs on T5's 48 blocks). One run per row; the cells CELLS names within CAP seconds.
D=bench/results/gpu-h200-2026-12-14-1
N=7
. bench/gpu/device_cells.sh
cell t5 t5 compile,compile-0.1,compile-0.1/blocks,tierpack+compile-0.3 60 330 step:stream,limit:hard --compile-budgets 60
plan_lines
