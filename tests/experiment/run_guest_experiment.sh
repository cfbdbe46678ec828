#!/usr/bin/env bash
# ctest numa.experiment: `tierpack experiment --mode real` on the CPU example's profile inside the
# two-node QEMU guest (scripts/numa-guest.sh), then checks of what it printed: the guest run
# succeeded, every policy has a row at every budget (measured, or "not available" with a reason),
# the four output files were written, the timings are labelled emulated, and tierpack's page-aware
# plan ran (a plan summary in its row). Exit 77 (skipped) only where the guest cannot run at all.
#   run_guest_experiment.sh REPO TIERPACK_BINARY
set -uo pipefail
repo=$1
tp=$2
out=$(mktemp)
trap 'rm -f "$out"' EXIT
"$repo/scripts/numa-guest.sh" --timeout 280 --file "$repo/tests/data/profiles/train_cpu.tpk" -- "$tp" experiment \
  --workload train_cpu.tpk --tiers preset:ddr5-cxl --mode real --fast-budgets 100%,30% --policies all --iterations 2 \
  -o /tmp/exp >"$out" 2>&1
rc=$?
cat "$out"
[ "$rc" = 77 ] && exit 77
fail() { echo "CHECK FAILED: $*"; exit 1; }
[ "$rc" = 0 ] || fail "the guest run exited with $rc"
for f in results.csv summary.md step_time.svg migration.svg; do
  grep -q "tierpack experiment: wrote /tmp/exp/$f" "$out" || fail "$f was not written"
done
grep -q "EMULATED" "$out" || fail "guest timings are not labelled emulated"
for b in 100% 30%; do
  for p in all-fast first-touch interleave preferred-fast lru-demand kernel-tiering damon page-agnostic page-aware; do
    grep -q "^| $b | $p | " "$out" || fail "no row for $p at $b"
  done
  grep -E "^\| $b \| page-aware \| [0-9.]+ (ms|s|us) \|.*host plan: " "$out" >/dev/null || fail "page-aware did not run at $b"
  for p in kernel-tiering damon; do
    grep -E "^\| $b \| $p \| (n/a \|.*not available|[0-9.]+ (ms|s|us) \|)" "$out" >/dev/null ||
      fail "$p row at $b neither measured nor marked not available"
  done
done
grep -q "progress\|\[real " "$out" || fail "no progress lines"
echo "numa.experiment: all checks passed"
