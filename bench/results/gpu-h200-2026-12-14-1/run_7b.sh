#!/bin/bash
# Session 43, device call 7, second run (commit COMMIT7; run as one command line from the same tree, right after call
# 2 on the same machine): run_7.sh's first run ran out of its 320 s on a machine just started (torch.compile of T5
# took 156 s with Inductor's caches cold; call7a.tgz), so this run keeps compile and tierpack+compile-0.3.
export CAP=530; D=bench/results/gpu-h200-2026-12-14-1; N=7; . bench/gpu/device_cells.sh
cell t5 t5 compile,tierpack+compile-0.3 60 530 step:stream,limit:hard --compile-budgets 60
plan_lines
