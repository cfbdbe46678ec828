#!/usr/bin/env bash
# Installs the build tree into a temporary prefix and builds + runs a consumer project against it
# with find_package(tierpack). Usage: test-consumer.sh <tierpack-build-dir> <consumer-source-dir>
set -euo pipefail
build=$1 src=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cmake --install "$build" --prefix "$work/prefix" >/dev/null
cmake -S "$src" -B "$work/build" -G Ninja -DCMAKE_PREFIX_PATH="$work/prefix" >/dev/null
cmake --build "$work/build" >/dev/null
"$work/build/consumer"
