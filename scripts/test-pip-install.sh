#!/usr/bin/env bash
# The Python install as a user does it: a fresh virtualenv of Debian's Python (with its torch, through
# --system-site-packages), `pip install --no-build-isolation .` offline, then, with nothing set by hand
# (no PYTHONPATH, TIERPACK_LIB, GLIBC_TUNABLES): `tierpack --version` equals tierpack.__version__,
# `python -m tierpack` runs the CLI, and `tierpack run` trains a tiny model with tierpack enabled from the
# installed package.
# Usage: scripts/test-pip-install.sh [BUILD_DIR]   BUILD_DIR: a configured build of this tree to install from
#        (TIERPACK_BUILD_DIR; scripts/test.sh passes build/); without it pip configures and builds build-pip/cmake.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
unset PYTHONPATH TIERPACK_LIB TIERPACK_CUDA_LIB GLIBC_TUNABLES TIERPACK_CONF

/usr/bin/python3 -m venv --system-site-packages "$work/venv"
py=$work/venv/bin/python
pip_env=()
[ $# -ge 1 ] && pip_env=(TIERPACK_BUILD_DIR="$(cd "$1" && pwd)")
echo "pip install --no-build-isolation ${pip_env[*]} $repo"
env "${pip_env[@]}" "$py" -m pip install --no-build-isolation --no-deps --no-index -q "$repo"

cd "$work"  # not the source tree: everything below must come from the virtualenv
cli_version=$("$work/venv/bin/tierpack" --version)
py_version=$("$py" -c 'import tierpack; print(tierpack.__version__)')
echo "tierpack --version: $cli_version; tierpack.__version__: $py_version"
[ "$cli_version" = "tierpack $py_version" ] || { echo "FAIL: the versions differ" >&2; exit 1; }
[ "$("$py" -m tierpack --version)" = "$cli_version" ] || { echo "FAIL: python -m tierpack --version" >&2; exit 1; }
"$py" -c 'import os, sys, tierpack
lib = tierpack.library_path()
assert lib and lib.startswith(sys.prefix), "libtierpack_torch.so not from the virtualenv: %s" % lib
print("import tierpack:", tierpack.__file__, lib)'

cat >"$work/train.py" <<'PY'
import sys
import torch
import tierpack

assert tierpack.enabled(), "tierpack is not enabled in the child"
assert tierpack.__file__.startswith(sys.prefix), tierpack.__file__
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.ReLU(), torch.nn.Linear(128, 8))
opt = torch.optim.SGD(model.parameters(), lr=0.1)
x, y = torch.randn(32, 64), torch.randn(32, 8)
for _ in range(5):
    loss = torch.nn.functional.mse_loss(model(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
print("train.py: loss %.4f, tierpack %s from %s" % (loss.item(), tierpack.__version__, tierpack.__file__))
PY
# The ddr5-cxl preset's slow tier is emulated on node 0 where the machine has one NUMA node (scripts/demo.sh).
"$work/venv/bin/tierpack" run --fast-budget 50% --tiers preset:ddr5-cxl -o "$work/run.tpk" --stats "$work/stats.json" -- "$py" "$work/train.py"
[ -s "$work/run.tpk" ] && [ -s "$work/stats.json" ] || { echo "FAIL: tierpack run wrote no profile/statistics" >&2; exit 1; }
"$py" -m tierpack profile --summary "$work/run.tpk" | head -3
echo "pip install: ok"
