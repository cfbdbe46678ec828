#!/bin/bash
# Session 44, device call 11 (commit COMMIT11): where the checkpointed steps under tierpack lose 14-16% to the
# prediction (call 2: HF GPT-2 large 416 ms measured against 357 predicted, T5 571 against 478). The same cells as
# call 2 (checkpointing, and tierpack under it at 60% of its peak with the streamed step), each child profiling one
# more step under torch.profiler (models_bench.py --profile: one trace per child); bench/gpu/trace_phases.py splits
# each trace into forward, backward and optimizer step (compute busy and idle, each copy direction's busy time and
# rate, the largest compute gaps). The traces come back gzipped. After them, run_10.sh's Llama cell. CAP and CELLS as in device_cells.sh.
D=bench/results/gpu-h200-2026-12-14-1
N=11
. bench/gpu/device_cells.sh
rm -rf /tmp/prof; mkdir -p /tmp/prof
cell hf-gpt2 hf-gpt2 ckpt,tierpack+ckpt 60 230 step:stream,limit:hard --ckpt-budgets 60 --profile /tmp/prof/p.json
cell t5 t5 ckpt,tierpack+ckpt 60 260 step:stream,limit:hard --ckpt-budgets 60 --profile /tmp/prof/p.json
for f in /tmp/prof/*.json; do python3 bench/gpu/trace_phases.py $f --json ${f%.json}.phases.json; gzip -1 $f; done \
  | tee $O/call${N}_phases.txt
cp /tmp/prof/*.phases.json $O/ 2>/dev/null
tar czf $OUT/call${N}.tgz -C /tmp call$N logs 2>/dev/null
for f in /tmp/prof/*.json.gz; do cp $f $OUT/$(basename $f | tr "+" "-"); done  # $OUT names: no "+"
# run_10.sh's first cell (deterministic losses under compile with tierpack, the Llama-style decoder), with the time left, in
# case no second machine comes this session
cell llama llama compile,compile-0.1/blocks,tierpack+compile-0.1 60 260 step:stream,limit:hard --compile-budgets 60 --deterministic
ls -la $OUT
plan_lines
