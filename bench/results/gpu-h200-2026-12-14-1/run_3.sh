#!/bin/bash
# Session 42, device call 3 (commit COMMIT3): torch.compile with one graph per block (TIERPACK_GPU compile:blocks,
# the new default: python/tierpack/compile_split.py, Note [Compile per block]). Call 1 found tierpack+compile-0.1 at
# 2.00-2.13x compile's step and 0.58-0.60 of the transfer bound: the whole model's compiled backward unpacks every
# saved tensor when it starts, so no copy back overlaps its compute. Here, per model: compile (whole, the baseline),
# compile-0.1/blocks (the split without tierpack: what the graph breaks cost), tierpack+compile-0.1 (split) at 60% of
# compile's peak, and on GPT-2 tierpack+compile (split, no compiler budget). One run per row; the cells CELLS names
# (default all) within CAP seconds (default 570).
D=bench/results/gpu-h200-2026-12-14-1
N=3
. bench/gpu/device_cells.sh
cell hf-gpt2 hf-gpt2 compile,compile-0.1/blocks,tierpack+compile-0.1,tierpack+compile 60 330 step:stream,limit:hard --compile-budgets 60
cell llama llama compile,compile-0.1/blocks,tierpack+compile-0.1 60 240 step:stream,limit:hard --compile-budgets 60
plan_lines
