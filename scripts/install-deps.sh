#!/usr/bin/env bash
# Installs what tierpack needs to build and test, from Debian 12 packages only. Idempotent: prints
# nothing and changes nothing when everything is already there. Needs root (or sudo) to install.
#   scripts/install-deps.sh            build + test dependencies
#   scripts/install-deps.sh --guest    also what the multi-NUMA QEMU guest tests need
#   scripts/install-deps.sh --browser  also Chromium for the report's rendering test
set -euo pipefail

pkgs=(build-essential cmake ninja-build ccache pkg-config git
      libnuma-dev libhwloc-dev hwloc libjemalloc-dev nlohmann-json3-dev libcli11-dev
      libgtest-dev libgmock-dev libbenchmark-dev
      libtorch-dev python3-torch python3-numpy
      python3-pip python3-venv python3-setuptools python3-wheel
      clang libclang-rt-14-dev clang-format clang-tidy numactl gdb)
for arg in "$@"; do
  case "$arg" in
    --guest) pkgs+=(qemu-system-x86 busybox-static cpio) ;;
    --browser) pkgs+=(chromium chromium-driver) ;;
    *) echo "install-deps.sh: unknown option '$arg' (use --guest, --browser)" >&2; exit 2 ;;
  esac
done

missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0

sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"
echo "install-deps: installing ${missing[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
$sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
