#!/usr/bin/env bash
# README command 1: installs what is missing, builds tierpack and runs its main job on this machine.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
export CCACHE_DIR=${CCACHE_DIR:-$PWD/.cache/ccache}
cmake -S . -B build -G Ninja -DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_CUDA_COMPILER_LAUNCHER=ccache >/dev/null
cmake --build build -j "$(nproc)" --target tierpack_cli >/dev/null
echo "== tiers on this machine (tierpack topo)"
build/bin/tierpack topo
