# shellcheck shell=bash
# The boot of the two-node QEMU guest, sourced by scripts/numa-guest.sh and scripts/hostfs-guest.sh (not run
# on its own): node 1 memory-only, HMAT latency/bandwidth so the kernel puts it in a lower memory tier.
#
#   boot_guest CPU WHAT [QEMU_ARGS...]
#
# Boots $kernel with $work/initrd.gz (the caller's variables, as are $node_mb per node, $timeout_s and its
# say()) on QEMU's CPU model CPU, with QEMU_ARGS added; WHAT names what the guest runs, for the messages
# ("the command"). Prints what the guest printed from its TIERPACK_GUEST_BEGIN marker on and exits with
# the exit code it reported in TIERPACK_GUEST_EXIT=, or 125 when it reported none (crash, timeout).
# shellcheck disable=SC2154  # kernel, work, node_mb, timeout_s: the caller's
boot_guest() {
  local cpu=$1 what=$2
  shift 2
  local mem=$((2 * node_mb)) log=$work/console.log qrc=0 rc attempt
  # A guest kernel that dies while booting under TCG, before WHAT starts (seen once: an int3 Oops in
  # sched_clock_cpu at 2 s), says nothing about it: boot once more. A guest that reached it is never retried.
  for attempt in 1 2; do
    set +e
    timeout "$timeout_s" qemu-system-x86_64 \
      -machine q35,accel=tcg,hmat=on -cpu "$cpu" -smp 2 -m "${mem}M" \
      -object memory-backend-ram,id=m0,size="${node_mb}M" -object memory-backend-ram,id=m1,size="${node_mb}M" \
      -numa node,nodeid=0,cpus=0-1,memdev=m0,initiator=0 -numa node,nodeid=1,memdev=m1,initiator=0 \
      -numa hmat-lb,initiator=0,target=0,hierarchy=memory,data-type=access-latency,latency=100 \
      -numa hmat-lb,initiator=0,target=0,hierarchy=memory,data-type=access-bandwidth,bandwidth=20G \
      -numa hmat-lb,initiator=0,target=1,hierarchy=memory,data-type=access-latency,latency=300 \
      -numa hmat-lb,initiator=0,target=1,hierarchy=memory,data-type=access-bandwidth,bandwidth=5G \
      "$@" \
      -kernel "$kernel" -initrd "$work/initrd.gz" \
      -append "console=ttyS0 quiet loglevel=3 panic=-1 numa_balancing=disable ${TIERPACK_GUEST_APPEND:-}" \
      -nodefaults -display none -serial stdio -no-reboot </dev/null >"$log" 2>&1
    qrc=$?
    set -e
    if [ "$attempt" = 1 ] && ! grep -q TIERPACK_GUEST_BEGIN "$log" && ! grep -q '^TIERPACK_GUEST_EXIT=' "$log"; then
      say "the guest kernel stopped before $what started (qemu exit $qrc): booting it once more"
      continue
    fi
    break
  done
  # Print what WHAT printed (between the markers); everything when the guest went wrong.
  tr -d '\r' <"$log" | sed 's/\x1b\[[0-9;]*m//g' | sed -n '/TIERPACK_GUEST_BEGIN/,$p' |
    grep -v '^TIERPACK_GUEST_EXIT=' | grep -v 'reboot: Power down' || true
  rc=$(tr -d '\r' <"$log" | sed -n 's/^TIERPACK_GUEST_EXIT=\([0-9]*\).*/\1/p' | tail -1)
  if [ -z "$rc" ]; then
    say "the guest did not report an exit code (qemu exit $qrc; timeout ${timeout_s}s). Console:"
    tr -d '\r' <"$log" | tail -50 >&2
    exit 125
  fi
  exit "$rc"
}
