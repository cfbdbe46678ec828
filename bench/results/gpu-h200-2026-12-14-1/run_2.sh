#!/bin/bash
# Session 41, device call 2 (commit COMMIT2): tierpack under the user's checkpointing at 60% of its peak with the
# streamed optimizer step (step:stream,limit:hard), on the two models call 5 of gpu-h200-2026-12-13-1 found over the
# budget there (HF GPT-2 17.14 GiB against 12.6, T5-style 15.06 against 10.2: the plan's DOES NOT FIT). One run per
# row; the cells CELLS names (default all) within CAP seconds (default 570).
D=bench/results/gpu-h200-2026-12-14-1
N=2
. bench/gpu/device_cells.sh
cell t5 t5 ckpt,tierpack+ckpt 60 200 step:stream,limit:hard --ckpt-budgets 60
cell hf-gpt2 hf-gpt2 ckpt,tierpack+ckpt 60 170 step:stream,limit:hard --ckpt-budgets 60
plan_lines
