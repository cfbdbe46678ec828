#!/usr/bin/env bash
# README command 1: installs what is missing, builds tierpack, and runs its main job on the embedded
# example model (examples/train_cpu.py, a small transformer + MLP on CPU, no network needed):
#   1. the tiers of this machine                    (tierpack topo)
#   2. profile one training iteration               (tierpack profile -- python examples/train_cpu.py)
#   3. what the profile says                        (tierpack profile --summary)
#   4. plan it for a DRAM + CXL machine at 50% DRAM (tierpack plan --tiers preset:ddr5-cxl)
#   5. replay the plan against baseline policies    (tierpack replay)
#   6. write the offline report                     (tierpack report -> out/demo/report/index.html)
# Outputs go to out/demo/.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
export CCACHE_DIR=${CCACHE_DIR:-$PWD/.cache/ccache}
echo "== building (build/)"
cmake -S . -B build -G Ninja -DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_CUDA_COMPILER_LAUNCHER=ccache >/dev/null
cmake --build build -j "$(nproc)" --target tierpack_cli tierpack_torch >/dev/null
tp=build/bin/tierpack
out=out/demo
mkdir -p "$out"

echo "== 1. tiers on this machine (tierpack topo)"
$tp topo
echo "== 2. profiling examples/train_cpu.py (tierpack profile)"
$tp profile -o "$out/run.tpk" -- /usr/bin/python3 examples/train_cpu.py --iters 6
echo "== 3. profile summary"
$tp profile --summary "$out/run.tpk" --top 10
echo "== 4. plan for DRAM + CXL with DRAM at 50% of the peak (tierpack plan)"
$tp plan "$out/run.tpk" --tiers preset:ddr5-cxl --fast-budget 50% -o "$out/plan.json"
echo "== 5. replay: tierpack's plan vs baseline policies (tierpack replay)"
$tp replay "$out/run.tpk" --plan "$out/plan.json"
echo "== 6. offline report (tierpack report)"
$tp report "$out/run.tpk" --plan "$out/plan.json" -o "$out/report"
echo "== done: open $out/report/index.html (Perfetto trace: $out/report/trace.json)"
