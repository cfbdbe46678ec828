#!/usr/bin/env bash
# `tierpack run --gpu-budget` reaches the Python bootstrap, which installs the GPU tier or says why not.
# Issue 26: the test passed on "no CUDA device" whatever the exit status. Now the run must succeed (exit 0,
# the training to its end, the host side's plan applied) and the GPU budget must have arrived: with a
# CUDA device the GPU tier reports its outcome; without one the bootstrap says it cannot install it.
#   gpu_budget_passthrough_test.sh BUILD_DIR SOURCE_DIR
set -euo pipefail
build=$1 src=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
set +e
"$build/bin/tierpack" run --gpu-budget 24G -- /usr/bin/python3 "$src/examples/train_cpu.py" --iters 3 >"$work/out.txt" 2>"$work/err.txt"
status=$?
set -e
cat "$work/err.txt"
[ "$status" = 0 ] || fail "exit status $status"
[ "$(grep -c '^iter ' "$work/out.txt")" = 3 ] || fail "the training did not run to its end"
grep -Eq '^tierpack run: (rank 0: )?plan applied from iteration 2 for 1 of 1 iteration' "$work/err.txt" || fail "the host side's plan was not applied"
if grep -q '^tierpack: no CUDA device: the GPU tier is not installed' "$work/err.txt"; then
  # No device here: the budget reached the bootstrap (it would not look for a device without one).
  ! grep -q 'GPU tier gpu' "$work/err.txt" || fail "a GPU tier outcome without a device"
elif grep -q '^tierpack run: GPU tier gpu0: phase .*budget 24.00 GiB' "$work/err.txt"; then
  :
else
  fail "neither the GPU tier's outcome (budget 24.00 GiB) nor why it was not installed"
fi
echo PASS
