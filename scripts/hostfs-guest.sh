#!/usr/bin/env bash
# Runs a command of THIS machine's filesystem inside the two-node QEMU guest of scripts/numa-guest.sh
# (TCG, Debian's 6.12 kernel, node 1 memory-only with HMAT). For programs too big to pack into an
# initramfs (Python + torch): the host's / is shared read-only over 9p (virtio-9p), the guest's
# busybox init loads the 9p modules from Debian's kernel package, mounts it, and chroots into it
# with /proc, /sys, /dev and a tmpfs /tmp for writes. Prints the command's output and exits with
# its exit code. Timings measured in the guest are emulated (TCG; both nodes have the same speed).
#
#   scripts/hostfs-guest.sh [--timeout SEC] [--node-mb MB] [--cwd DIR] -- COMMAND [ARGS...]
#
# Exit codes: COMMAND's own; 77 when QEMU is missing (ctest: skipped); 125 when the guest could not
# be built or did not report an exit code (crash, timeout).
set -euo pipefail

repo=$(cd "$(dirname "$0")/.." && pwd)
cache=${TIERPACK_GUEST_CACHE:-$repo/.cache/numa-guest}
node_mb=1024
timeout_s=900
cpu=${TIERPACK_GUEST_CPU:-max}
cwd=$PWD
while [ $# -gt 0 ]; do
  case "$1" in
    --timeout) timeout_s=$2; shift 2 ;;
    --node-mb) node_mb=$2; shift 2 ;;
    --cwd) cwd=$2; shift 2 ;;
    --) shift; break ;;
    *) echo "hostfs-guest.sh: unknown option '$1'" >&2; exit 2 ;;
  esac
done
[ $# -ge 1 ] || { echo "usage: hostfs-guest.sh [--timeout SEC] [--node-mb MB] [--cwd DIR] -- COMMAND [ARGS...]" >&2; exit 2; }
say() { echo "hostfs-guest: $*" >&2; }
# shellcheck source=scripts/lib/guest-boot.sh
. "$repo/scripts/lib/guest-boot.sh"

# The kernel (and QEMU) come from numa-guest.sh's cache; it downloads them when missing.
TIERPACK_GUEST_CACHE=$cache "$repo/scripts/numa-guest.sh" --build-only >&2 || exit $?
kernel=$(ls "$cache"/vmlinuz-6.12* | sort -V | tail -1)
kver=$(basename "$kernel" | sed 's/^vmlinuz-//')

# ---- the 9p modules of the same kernel package (decompressed: busybox insmod takes plain .ko) ----
mods=$cache/modules-$kver
if [ ! -f "$mods/9p.ko" ] || [ ! -f "$mods/overlay.ko" ]; then
  pkg=linux-image-$kver
  say "extracting the 9p modules from $pkg"
  dl=$(mktemp -d "$cache/dl.XXXXXX")
  (cd "$dl" && apt-get download "$pkg" >/dev/null 2>&1) || { say "apt-get download $pkg failed"; rm -rf "$dl"; exit 125; }
  dpkg-deb --fsys-tarfile "$dl"/*.deb | tar -x -C "$dl" --wildcards \
    "./lib/modules/$kver/kernel/fs/netfs/netfs.ko.xz" "./lib/modules/$kver/kernel/fs/9p/9p.ko.xz" \
    "./lib/modules/$kver/kernel/net/9p/9pnet.ko.xz" "./lib/modules/$kver/kernel/net/9p/9pnet_virtio.ko.xz" \
    "./lib/modules/$kver/kernel/fs/overlayfs/overlay.ko.xz"
  mkdir -p "$mods"
  for m in netfs 9pnet 9pnet_virtio 9p overlay; do
    xz -dc "$(find "$dl" -name "$m.ko.xz")" >"$mods/$m.ko"
  done
  rm -rf "$dl"
fi

# ---- initramfs: busybox, the modules, an init that mounts the host and chroots -------------------
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
root=$work/root
mkdir -p "$root"/{bin,proc,sys,dev,mods,host}
cp /bin/busybox "$root/bin/busybox"
cp "$mods"/*.ko "$root/mods/"
{
  printf 'cd %q\n' "$cwd"
  printf 'export TIERPACK_IN_GUEST=1 HOME=/tmp PATH=/usr/local/bin:/usr/bin:/bin\n'
  for a in "$@"; do printf '%q ' "$a"; done
  printf '\n'
} >"$root/run.sh"
cat >"$root/init" <<'EOF'
#!/bin/busybox sh
/bin/busybox --install -s /bin
mount -t proc proc /proc
mount -t sysfs sys /sys
mount -t devtmpfs dev /dev 2>/dev/null
for m in netfs 9pnet 9pnet_virtio 9p overlay; do insmod /mods/$m.ko || echo "insmod $m failed"; done
echo 0 > /proc/sys/kernel/numa_balancing 2>/dev/null
if mount -t 9p -o trans=virtio,version=9p2000.L,ro,msize=1048576,cache=loose hostfs /host; then
  for fs in proc:proc sysfs:sys devtmpfs:dev; do
    mount -t "${fs%%:*}" "${fs#*:}" "/host/${fs#*:}" || echo "hostfs-guest: mounting ${fs%%:*} on /host/${fs#*:} failed"
  done
  # /tmp: writable, and still showing the host's /tmp (a checkout or build tree may live there): an
  # overlay of a guest tmpfs over the read-only host directory; a plain tmpfs if overlay is refused.
  mkdir -p /rw && mount -t tmpfs rw /rw && mkdir -p /rw/up /rw/work
  mount -t overlay overlay -o lowerdir=/host/tmp,upperdir=/rw/up,workdir=/rw/work /host/tmp ||
    { echo "hostfs-guest: overlay on /tmp refused: the host's /tmp is hidden in the guest"; mount -t tmpfs tmp /host/tmp; }
  cp /run.sh /host/tmp/.tierpack-run.sh
  echo "TIERPACK_GUEST_BEGIN nodes=$(ls -d /sys/devices/system/node/node* | wc -l) kernel=$(uname -r)"
  t0=$(cut -d' ' -f1 /proc/uptime)
  chroot /host /bin/sh /tmp/.tierpack-run.sh
  rc=$?
  echo "guest: command took $(awk -v a=$t0 -v b=$(cut -d' ' -f1 /proc/uptime) 'BEGIN{print b-a}') s (emulated)"
else
  echo "TIERPACK_GUEST_BEGIN (9p mount failed)"
  rc=125
fi
echo "TIERPACK_GUEST_EXIT=$rc"
poweroff -f
EOF
chmod +x "$root/init"
(cd "$root" && find . | /bin/busybox cpio -o -H newc 2>/dev/null | gzip -1) >"$work/initrd.gz"

# multidevs=remap: without it the host's /proc, /sys, /dev (other devices) share 9p inode numbers.
boot_guest "$cpu" "the command" \
  -virtfs local,path=/,mount_tag=hostfs,security_model=none,readonly=on,multidevs=remap
