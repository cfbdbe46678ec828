#!/bin/bash
# Session 43, device call 7, third run (commit COMMIT7; one command line from the same tree, on the same machine after
# run_7b.sh; its archive renamed call7c.tgz): what compile's own activation memory budget and the split cost T5-style
# without tierpack (no tierpack cell: the 60 names no budget here).
export CAP=400; D=bench/results/gpu-h200-2026-12-14-1; N=7; . bench/gpu/device_cells.sh
cell t5b t5 compile,compile-0.3,compile-0.3/blocks,compile-0.1/blocks 60 400
