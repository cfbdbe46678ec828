#!/usr/bin/env bash
# README command 1: installs what is missing, builds tierpack, and runs its main job on the embedded
# example model (examples/train_cpu.py, a small transformer + MLP on CPU, no network needed):
#   1. the tiers of this machine                         (tierpack topo)
#   2. profile one training iteration and summarise it   (tierpack profile, profile --summary)
#   3. plan it with DRAM at 50% of the peak              (tierpack plan)
#   4. run it under tierpack with that budget: profile -> plan -> apply, same losses as without
#      tierpack                                          (tierpack run)
#   5. the offline report with the run's measured moves  (tierpack report -> out/demo/report/index.html)
# On a machine with one NUMA node the slow tier of step 3-4 is the ddr5-cxl preset's CXL tier,
# emulated on node 0 (budgets and moves are enforced and counted, pages stay on node 0); with a
# memory-only second node it is that node. Outputs go to out/demo/.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
export CCACHE_DIR=${CCACHE_DIR:-$PWD/.cache/ccache}
echo "== building (build/)"
cmake -S . -B build -G Ninja -DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_CUDA_COMPILER_LAUNCHER=ccache >/dev/null
cmake --build build -j "$(nproc)" --target tierpack_cli tierpack_torch tierpack_preload >/dev/null
tp=build/bin/tierpack
py=/usr/bin/python3
out=out/demo
mkdir -p "$out"
nodes=$(ls -d /sys/devices/system/node/node[0-9]* 2>/dev/null | wc -l)
if [ "$nodes" -ge 2 ]; then
  tiers=()
  where="this machine's NUMA nodes"
else
  tiers=(--tiers preset:ddr5-cxl)
  where="preset ddr5-cxl (one NUMA node here: the CXL tier is emulated on node 0)"
fi

echo "== 1. tiers on this machine (tierpack topo)"
$tp topo
echo "== 2. profiling examples/train_cpu.py (tierpack profile)"
$tp profile -o "$out/profile.tpk" -- $py examples/train_cpu.py --iters 6
$tp profile --summary "$out/profile.tpk" --top 8
echo "== 3. plan with DRAM at 50% of the peak, tiers: $where (tierpack plan)"
$tp plan "$out/profile.tpk" "${tiers[@]}" --fast-budget 50% -o "$out/plan-offline.json"
echo "== 4. the training run under tierpack with that budget (tierpack run)"
$py examples/train_cpu.py --iters 6 >"$out/losses-plain.txt"
$tp run "${tiers[@]}" --fast-budget 50% -o "$out/run.tpk" --stats "$out/stats.json" -- \
  $py examples/train_cpu.py --iters 6 | tee "$out/losses-tierpack.txt"
if diff -q "$out/losses-plain.txt" "$out/losses-tierpack.txt" >/dev/null; then
  echo "   losses identical to the run without tierpack"
else
  echo "   WARNING: losses differ from the run without tierpack:"; diff "$out/losses-plain.txt" "$out/losses-tierpack.txt" || true
fi
echo "== 5. offline report: profile, plan and the run's measured counters (tierpack report)"
$tp report "$out/run.tpk" --plan "$out/run.plan.json" --run-stats "$out/stats.json" -o "$out/report"
echo "== done: open $PWD/$out/report/index.html (Perfetto trace: $out/report/trace.json)"
