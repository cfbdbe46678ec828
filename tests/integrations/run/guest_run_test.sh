#!/usr/bin/env bash
# Issue 5's "done when" in the two-node guest: the embedded CPU example under `tierpack run` with a
# fast budget below its peak trains to the same losses as without tierpack, with node 1 (memory-only,
# a lower memory tier: how CXL memory appears) as the slow tier, and the tensors from before the
# plan (parameters, optimizer state) whose page group the plan evicts and prefetches are on node 1
# after the eviction and back on node 0 after the prefetch (move_pages status). Runs INSIDE the guest
# (scripts/hostfs-guest.sh shares this machine's filesystem read-only); writes go to /tmp.
#   guest_run_test.sh BUILD_DIR SOURCE_DIR [ITERS]
set -euo pipefail
build=$1 src=$2 iters=${3:-4}
py=/usr/bin/python3
tp=$build/bin/tierpack
echo "== nodes: $(ls -d /sys/devices/system/node/node[0-9]* | xargs -n1 basename | tr '\n' ' ')"
"$tp" topo
t0=$(date +%s)
$py "$src/examples/train_cpu.py" --iters "$iters" >/tmp/plain.txt
t1=$(date +%s)
echo "== plain run: $((t1 - t0)) s (emulated)"
cat /tmp/plain.txt
"$tp" run --fast-budget 50% -o /tmp/run.tpk --stats /tmp/stats.json -- $py "$src/examples/train_cpu.py" --iters "$iters" \
  >/tmp/run.txt
t2=$(date +%s)
echo "== tierpack run: $((t2 - t1)) s (emulated)"
cat /tmp/run.txt
$py - /tmp/stats.json <<'PY'
import json, sys
j = json.load(open(sys.argv[1]))
r = j["tierpack_run"]
print("== stats: fast budget %d B, plan applied from iteration %d, emulated tiers: %s" % (
    j["fast_budget_bytes"], r["apply_from"], r["emulated_tiers"] or "none"))
for i in r["iterations"]:
    m = i["moves"]
    print("  iteration %d: %s, step %.1f ms (emulated), allocations %d (routed by plan %d, over budget %d), "
          "fast peak %d B, bytes to slow %d, to fast %d, pages moved %d, late %d, failures %s" % (
          i["index"], "plan" if i["planned"] else "profiling/warm-up", i["step_ns"] / 1e6, i["allocations"],
          i["routed_by_plan"], i["over_budget"], i["fast_peak_bytes"], m["bytes_to_slow"], m["bytes_to_fast"],
          m["pages_moved"], m["moves_late"], m["failures_by_errno"]))
print("  tensors from before the plan: %d B on the fast node, %d B moved to the slow node" % (
    r["arena_fast_bytes"], r["arena_slow_bytes"]))
print("  residency at exit (move_pages status, pages by node / -errno):", r.get("residency_pages"))
# Tensors from before the plan follow their groups' moves: where their pages were (move_pages status)
# when each move of their group ended in the first planned iteration.
checks = r.get("arena_move_checks", [])
for c in checks:
    print("  arena tensors of group %d after %s (iteration %d): %d pages on node %d, %d elsewhere, %d absent" % (
        c["group"], c["kind"], c["iteration"], c["pages_on_node"], c["node"], c["pages_elsewhere"], c["pages_absent"]))
def landed(c): return c["pages_on_node"] > 0 and c["pages_elsewhere"] == 0
round_trips = {c["group"] for c in checks if c["kind"] == "evict" and landed(c)} & \
              {c["group"] for c in checks if c["kind"] == "prefetch" and landed(c)}
nodes = {(c["kind"], c["node"]) for c in checks}
carried = bool(round_trips) and not any(k == "evict" and n == 0 for k, n in nodes) and \
          not any(k == "prefetch" and n != 0 for k, n in nodes)
print("== tensors from before the plan: groups evicted to node 1 and prefetched back to node 0:",
      sorted(round_trips) or "none", "ok" if carried else "FAILED")
planned = [i for i in r["iterations"] if i["planned"]]
ok = (carried and r["plan_applied"] and not r["emulated_tiers"] and planned and
      all(i["moves"]["bytes_to_slow"] > 0 and i["moves"]["pages_moved"] > 0 for i in planned) and
      all(i["fast_peak_bytes"] <= j["fast_budget_bytes"] for i in planned if i["moves"]["moves_partial"] == 0))
print("== stats check:", "ok" if ok else "FAILED")
sys.exit(0 if ok else 1)
PY
if diff /tmp/plain.txt /tmp/run.txt >/dev/null; then
  echo "== losses identical under tierpack run in the two-node guest"
else
  diff /tmp/plain.txt /tmp/run.txt || true
  echo "FAIL: losses differ"; exit 1
fi
echo PASS
