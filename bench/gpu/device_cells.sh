#!/bin/bash
# What a device call's script (bench/results/<folder>/run_N.sh) sources: the call's environment written to
# /tmp/callN/envN.txt, and cell(), which runs bench/gpu/models_bench.py for one cell under its own time limit,
# prints its table lines, and writes the archive $OUT/callN.tgz (tables, JSON, children's logs) after each cell.
# The caller sets D (its folder, holding COMMITN) and N (the call's number) first. Settings: CAP=<s> the time for
# all cells (default 570), CELLS="a b" the cells that run (default all).
set -o pipefail
export PYTHONUNBUFFERED=1 TIERPACK_CUDA_LIB=$PWD/.devcarry/lib/libtierpack_cuda.so
[ -f "$D/COMMIT$N" ] || { echo "device_cells.sh: no $D/COMMIT$N (set D and N first)" >&2; exit 2; }
[ -f "$TIERPACK_CUDA_LIB" ] || { echo "device_cells.sh: no $TIERPACK_CUDA_LIB (carry .devcarry)" >&2; exit 2; }
O=/tmp/call$N; rm -rf $O /tmp/logs; mkdir -p $O
{ echo "commit $(cat $D/COMMIT$N)"; nvidia-smi --query-gpu=name,driver_version,pcie.link.gen.max,pcie.link.width.max --format=csv,noheader
  python3 -c 'import torch, transformers;print("torch",torch.__version__, "transformers", transformers.__version__)'
  nproc; grep -m1 "model name" /proc/cpuinfo; } > $O/env$N.txt
cat $O/env$N.txt
START=$(date +%s)
cell() {  # name model modes budgets timeout [gpu-options] [more models_bench.py arguments...]
  case " ${CELLS:-$1} " in *" $1 "*) ;; *) echo "== $1: not in CELLS"; return;; esac
  local left=$(( ${CAP:-570} - ($(date +%s) - START) )) t=$5
  [ $left -lt $t ] && t=$left
  [ $t -lt 40 ] && { echo "== $1: skipped, $left s left"; return; }
  timeout $t python3 bench/gpu/models_bench.py --lib $TIERPACK_CUDA_LIB --steps 4 --warmup 3 --tierpack-warmup 18 \
    --child-timeout 200 --commit $(cat $D/COMMIT$N) --logs /tmp/logs/$1 --models $2 --modes $3 --budgets "$4" \
    ${6:+--gpu-options $6} "${@:7}" --json $O/call${N}_$1.json > $O/call${N}_$1.txt 2>&1
  echo "rc=$?" >> $O/call${N}_$1.txt
  echo "== $1"; grep -v "^step" $O/call${N}_$1.txt | grep "^| [dtc]\|rc=\|^- " | cut -c1-300
  { echo; echo "## iterations (bench/gpu/iterations_table.py)"; python3 bench/gpu/iterations_table.py $O/call${N}_$1.json 2>&1; } >> $O/call${N}_$1.txt
  tar czf $OUT/call${N}.tgz -C /tmp call$N logs 2>/dev/null
}
plan_lines() {  # the tierpack children's plan lines, at the end of the call
  grep -h "plan from\|allocator held\|runs .* a step\|compiled\|DOES NOT\|out of memory" /tmp/logs/*/*tierpack*.log | cut -c1-200 | tail -${1:-30}
}
