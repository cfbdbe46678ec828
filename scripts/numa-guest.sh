#!/usr/bin/env bash
# Runs a program inside a small QEMU guest with two NUMA nodes, node 1 memory-only (how a CXL
# memory expander appears to Linux), with HMAT latency/bandwidth so the kernel puts node 1 in a
# lower memory tier. Prints the program's output and exits with its exit code.
#
#   scripts/numa-guest.sh [options] -- PROGRAM [ARGS...]
#     --file PATH      also copy PATH into the guest's /test (repeatable)
#     --env NAME=VAL   set an environment variable for PROGRAM (repeatable)
#     --timeout SEC    kill the guest after SEC seconds (default 300)
#     --build-only     build/refresh the cached kernel and base initramfs, run nothing
#
# Everything comes from Debian packages: QEMU 7.2 (qemu-system-x86) runs TCG (-accel tcg; the
# nested /dev/kvm of CI machines cannot boot Debian kernels), the kernel is Debian's 6.12 image
# from bookworm-security (apt-get download + dpkg-deb; the 6.1 kernel lacks memory tiers and its
# move_pages status query breaks after the first migration), the initramfs is busybox-static
# packed with `busybox cpio`. The kernel and base initramfs are cached in $TIERPACK_GUEST_CACHE
# (default: .cache/numa-guest in the repository). PROGRAM may be dynamic: the libraries ldd lists
# are copied in. Timings measured in the guest are emulated: both nodes have the same real speed.
#
# Exit codes: PROGRAM's own; 77 when QEMU is missing and cannot be installed (ctest: skipped);
# 125 when the guest could not be built or did not report an exit code (crash, timeout).
set -euo pipefail

repo=$(cd "$(dirname "$0")/.." && pwd)
cache=${TIERPACK_GUEST_CACHE:-$repo/.cache/numa-guest}
node_mb=${TIERPACK_GUEST_NODE_MB:-512}
timeout_s=300
files=()
envs=()
build_only=0
while [ $# -gt 0 ]; do
  case "$1" in
    --file) files+=("$2"); shift 2 ;;
    --env) envs+=("$2"); shift 2 ;;
    --timeout) timeout_s=$2; shift 2 ;;
    --build-only) build_only=1; shift ;;
    --) shift; break ;;
    -*) echo "numa-guest.sh: unknown option '$1'" >&2; exit 2 ;;
    *) break ;;
  esac
done
if [ "$build_only" = 0 ] && [ $# -lt 1 ]; then
  echo "usage: numa-guest.sh [--file PATH] [--env N=V] [--timeout SEC] -- PROGRAM [ARGS...]" >&2
  exit 2
fi

say() { echo "numa-guest: $*" >&2; }
# shellcheck source=scripts/lib/guest-boot.sh
. "$repo/scripts/lib/guest-boot.sh"

# ---- QEMU and busybox ----------------------------------------------------------------------------
if ! command -v qemu-system-x86_64 >/dev/null || ! [ -x /bin/busybox ]; then
  "$repo/scripts/install-deps.sh" --guest >&2 || true
fi
if ! command -v qemu-system-x86_64 >/dev/null || ! [ -x /bin/busybox ]; then
  echo "SKIPPED: qemu-system-x86_64 or busybox-static is not installed and could not be installed" \
       "(scripts/install-deps.sh --guest)"
  exit 77
fi
mkdir -p "$cache"

# ---- kernel: Debian's newest 6.12 image, only its vmlinuz kept ----------------------------------
kernel=$(ls "$cache"/vmlinuz-6.12* 2>/dev/null | sort -V | tail -1 || true)
if [ -z "$kernel" ]; then
  find_pkg() { apt-cache search --names-only '^linux-image-6\.12\.[0-9]+\+deb12-amd64$' | awk '{print $1}' | sort -V | tail -1; }
  pkg=$(find_pkg)
  if [ -z "$pkg" ]; then
    say "no linux-image-6.12 package known to apt; running apt-get update"
    apt-get update -qq >&2 || true
    pkg=$(find_pkg)
  fi
  if [ -z "$pkg" ]; then
    say "cannot find Debian's linux-image-6.12*-amd64 package (bookworm-security in sources.list?)"
    exit 125
  fi
  say "downloading $pkg"
  dl=$(mktemp -d "$cache/dl.XXXXXX")
  (cd "$dl" && apt-get download "$pkg" >/dev/null 2>&1) || { say "apt-get download $pkg failed"; rm -rf "$dl"; exit 125; }
  dpkg-deb --fsys-tarfile "$dl"/*.deb | tar -x -C "$dl" --wildcards './boot/vmlinuz-*'
  mv "$dl"/boot/vmlinuz-* "$cache/"
  rm -rf "$dl"
  kernel=$(ls "$cache"/vmlinuz-6.12* | sort -V | tail -1)
fi

# ---- base initramfs: busybox + /init (rebuilt when this script changes) ------------------------
stamp=$(sha256sum "$0" | cut -c1-16)
base=$cache/base-$stamp.cpio.gz
if [ ! -f "$base" ]; then
  rm -f "$cache"/base-*.cpio.gz
  root=$(mktemp -d)
  mkdir -p "$root"/{bin,sbin,proc,sys,dev,tmp,test}
  cp /bin/busybox "$root/bin/busybox"
  cat >"$root/init" <<'EOF'
#!/bin/busybox sh
/bin/busybox --install -s /bin
mount -t proc proc /proc
mount -t sysfs sys /sys
mount -t devtmpfs dev /dev 2>/dev/null
mount -t tmpfs tmp /tmp
echo 0 > /proc/sys/kernel/numa_balancing 2>/dev/null
cd /test
echo "TIERPACK_GUEST_BEGIN nodes=$(ls -d /sys/devices/system/node/node* | wc -l) kernel=$(uname -r)"
sh /test/run.sh
rc=$?
[ "$rc" -ne 0 ] && { echo "--- guest kernel log (last lines) ---"; dmesg | tail -15; }
echo "TIERPACK_GUEST_EXIT=$rc"
poweroff -f
EOF
  chmod +x "$root/init"
  (cd "$root" && find . | /bin/busybox cpio -o -H newc 2>/dev/null | gzip -1) >"$base"
  rm -rf "$root"
fi
[ "$build_only" = 1 ] && { say "kernel $(basename "$kernel"), initramfs $(basename "$base") ready in $cache"; exit 0; }

# ---- per-run archive: the program, its libraries, extra files, run.sh --------------------------
prog=$1
shift
[ -f "$prog" ] || { say "no such program: $prog"; exit 125; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
root=$work/root
mkdir -p "$root/test"
cp "$prog" "$root/test/"
for f in "${files[@]}"; do cp -r "$f" "$root/test/"; done
# Shared libraries (and the loader) at their host paths; nothing for a static program.
if ldd "$prog" >/dev/null 2>&1; then
  for lib in $(ldd "$prog" | grep -o '/[^ ]*' | sort -u); do
    mkdir -p "$root$(dirname "$lib")"
    cp -L "$lib" "$root$lib"
  done
fi
{
  for e in "${envs[@]}"; do printf 'export %q\n' "$e"; done
  printf 'export TIERPACK_IN_GUEST=1\n'
  printf './%q' "$(basename "$prog")"
  for a in "$@"; do printf ' %q' "$a"; done
  printf '\n'
} >"$root/test/run.sh"
(cd "$root" && find . | /bin/busybox cpio -o -H newc 2>/dev/null | gzip -1) >"$work/run.cpio.gz"
cat "$base" "$work/run.cpio.gz" >"$work/initrd.gz"

# ---- boot ---------------------------------------------------------------------------------------
boot_guest max "the test program"
