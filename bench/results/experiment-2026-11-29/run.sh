#!/usr/bin/env bash
# Reproduces the tables in this folder (README.md says what each is). Run from the repository root
# after building (cmake -DTIERPACK_WITH_TORCH=OFF; ninja tierpack_cli tierpack_synth).
#   bench/results/experiment-2026-11-29/run.sh [build]
set -euo pipefail
build=${1:-build}
here=bench/results/experiment-2026-11-29
tp=$build/bin/tierpack

# 1. CPU example (examples/train_cpu.py): the profile committed as tests/data/profiles/train_cpu.tpk was made with
#    TIERPACK_LIB=.../libtierpack_torch.so tierpack profile -o train_cpu.tpk -- /usr/bin/python3 examples/train_cpu.py --iters 6
for preset in ddr5-cxl ddr5-remote-socket; do
  $tp experiment --workload tests/data/profiles/train_cpu.tpk --tiers preset:$preset \
    --fast-budgets 100%,75%,50%,30%,20% --policies all -o $here/cpu-$preset >/dev/null
done

# 2. GPT-2 large shaped synthetic profile (no profile of the H200 benchmark exists in the repository):
#    36 transformer layers as 144 synthetic MLP-like blocks, 774M fp32 parameters with gradients and AdamW
#    state (11.96 GiB persistent), activations sized so the peak is the measured 29.9 GiB, op speed so the
#    iteration is the measured 145 ms default step.
$build/bin/tierpack-synth -o $here/gpt2-large-synthetic.tpk --tensors 2448 --param-bytes 21500K \
  --activation-bytes 42M --bytes-per-ns 3500 --seed 1
# Validation against bench/results/gpu-h200-2026-11-29 (GPT-2 large, B=8, T=1024): default 145 ms;
# tierpack 100% (allocator budget 29.9 - 0.67 GiB context, persistent:off, run 2a) 147 ms;
# tierpack 75% (22.4 - 0.67 GiB, run 1) 490 ms; and from branch gpu2, bench/results/gpu-h200-2026-11-29-2:
# tierpack 60% (allocator budget 18546871500 B = 17.27 GiB, call 1) 835 ms; tierpack 35% (10519809228 B = 9.80 GiB,
# call 3, remap_threads:4) 8189 ms.
$tp experiment --workload $here/gpt2-large-synthetic.tpk --tiers preset:h200-pcie \
  --fast-budgets 100%,75%,60%,50%,30%,20% --policies all \
  --measured 'all-fast=145ms,page-aware@29.23G=147ms,page-aware@21.73G=490ms,page-aware@17.27G=835ms,page-aware@9.80G=8189ms' \
  --measured-source 'H200: bench/results/gpu-h200-2026-11-29 (first three), gpu-h200-2026-11-29-2 on branch gpu2 (last two)' \
  -o $here/gpt2-h200 >/dev/null
rm -f $here/gpt2-large-synthetic.tpk

# 3. Real nodes, emulated: the CPU example's profile replayed for real on the two NUMA nodes of the QEMU
#    test guest (node 1 memory-only, HMAT says slower, but both nodes run at the same real speed).
#    The guest's files vanish with it: TIERPACK_EXPERIMENT_DUMP prints them, awk splits them here.
mkdir -p $here/cpu-real-guest
scripts/numa-guest.sh --timeout 590 --env TIERPACK_EXPERIMENT_DUMP=1 --file tests/data/profiles/train_cpu.tpk -- \
  $tp experiment --workload train_cpu.tpk --tiers preset:ddr5-cxl --mode real --fast-budgets 100%,50%,30%,20% \
  --policies all --iterations 4 -o /tmp/exp >$here/cpu-real-guest/guest.log 2>&1
awk -v dir=$here/cpu-real-guest '/^=== TIERPACK FILE .* ===$/ {f = dir "/" $4; printf "" > f; next}
     /^=== TIERPACK END ===$/ {close(f); f = ""; next} f != "" {print >> f}' $here/cpu-real-guest/guest.log
