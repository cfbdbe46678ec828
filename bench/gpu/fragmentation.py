#!/usr/bin/env python3
"""Where PyTorch's allocator holds more than its live bytes, from one step's allocator history.

Reads a snapshot pickle written by ``models_bench.py --snapshot`` (``torch.cuda.memory._snapshot()`` after
one step recorded with ``_record_memory_history``), rebuilds the live blocks and the mapped (reserved)
bytes at every event of that step, and prints: the live and mapped curves' peaks and, at the live peak (where
the budget binds), the mapped bytes and the free space between live blocks by size class (the holes of Note
[Reserved memory] in python/tierpack/reserved_memory.py), the largest holes with the blocks around them, and the
allocation that made the allocator map more memory at the mapped peak, if the step mapped any. Where the holes
came from: the bytes of each hole by the place that allocated the blocks last freed there (before the live peak),
and the mapped bytes per stream at the live peak (expandable segments map one range per stream: memory freed on one
stream's range serves no allocation on another's).

Usage: python3 bench/gpu/fragmentation.py SNAPSHOT.pickle [--top 8] [--json out.json]
"""

import argparse
import bisect
import json
import pickle
import sys

MiB = 1 << 20
CLASSES = [(0, 2 * MiB), (2 * MiB, 20 * MiB), (20 * MiB, 100 * MiB), (100 * MiB, 500 * MiB), (500 * MiB, 1 << 62)]


def blocks_at_end(segments):
    """{address: size} of the live blocks, and the mapped ranges [(address, size)] when the snapshot was taken."""
    live, ranges = {}, []
    for seg in segments:
        ranges.append((seg["address"], seg["total_size"]))
        addr = seg["address"]
        for b in seg["blocks"]:
            a = b.get("address", addr)
            if b["state"] in ("active_allocated", "active_pending_free"):
                live[a] = b["size"]
            addr = a + b["size"]
    return live, ranges


def frame_text(ev):
    frames = ev.get("frames") or []
    keep = [f for f in frames if "torch/" not in f.get("filename", "") or "tierpack" in f.get("filename", "")]
    f = (keep or frames or [{}])[0]
    return "%s:%s %s" % (f.get("filename", "?").split("site-packages/")[-1], f.get("line", "?"), f.get("name", "?"))


def analyse(snap, top):
    trace = snap["device_traces"][0]
    end_live, end_ranges = blocks_at_end(snap["segments"])
    # The live blocks when the recording started: those live at the end less those allocated during it,
    # plus those freed during it that it never saw allocated.
    during, freed_first = {}, {}
    for ev in trace:
        if ev["action"] == "alloc":
            during[ev["addr"]] = ev["size"]
        elif ev["action"] == "free_completed":
            if ev["addr"] in during:
                del during[ev["addr"]]
            else:
                freed_first[ev["addr"]] = ev["size"]
    start_live = {a: s for a, s in end_live.items() if a not in during}
    start_live.update(freed_first)
    mapped_end = sum(s for _, s in end_ranges)
    dmap = sum(ev["size"] if ev["action"] in ("segment_map", "segment_alloc") else -ev["size"]
               for ev in trace if ev["action"] in ("segment_map", "segment_alloc", "segment_unmap", "segment_free"))
    mapped = mapped_end - dmap
    live = dict(start_live)
    live_bytes = sum(live.values())
    # mapped bytes per stream (at the recording's start: the segments' less what the step mapped on each)
    by_stream = {}
    for seg in snap["segments"]:
        by_stream[seg.get("stream", 0)] = by_stream.get(seg.get("stream", 0), 0) + seg["total_size"]
    for ev in trace:
        if ev["action"] in ("segment_map", "segment_alloc", "segment_unmap", "segment_free"):
            sign = 1 if ev["action"] in ("segment_map", "segment_alloc") else -1
            by_stream[ev.get("stream", 0)] = by_stream.get(ev.get("stream", 0), 0) - sign * ev["size"]
    alloc_at = {}   # address -> the alloc event of its live block
    freed = {}      # address -> (size, alloc event index or -1, free event index or -1) of the block last freed there
    free_req = {}   # address -> its free_requested event (the free's own stack)
    best = {"at": -1, "mapped": mapped, "live": live_bytes, "blocks": dict(live), "freed": {}, "streams": dict(by_stream)}
    peak_mapped, peak_live, peak_map_at = mapped, live_bytes, -1
    for i, ev in enumerate(trace):
        act = ev["action"]
        if act == "alloc":
            live[ev["addr"]] = ev["size"]; live_bytes += ev["size"]
            alloc_at[ev["addr"]] = i
        elif act == "free_requested":
            free_req[ev["addr"]] = i
        elif act == "free_completed" and ev["addr"] in live:
            live_bytes -= live.pop(ev["addr"])
            freed[ev["addr"]] = (ev["size"], alloc_at.pop(ev["addr"], -1), free_req.pop(ev["addr"], -1))
        elif act in ("segment_map", "segment_alloc"):
            mapped += ev["size"]
            by_stream[ev.get("stream", 0)] = by_stream.get(ev.get("stream", 0), 0) + ev["size"]
            if mapped > peak_mapped:
                peak_mapped, peak_map_at = mapped, i
        elif act in ("segment_unmap", "segment_free"):
            mapped -= ev["size"]
            by_stream[ev.get("stream", 0)] = by_stream.get(ev.get("stream", 0), 0) - ev["size"]
        peak_live = max(peak_live, live_bytes)
        if live_bytes > best["live"] and act == "alloc":  # the live peak (a map comes just before its allocation)
            best = {"at": i, "mapped": mapped, "live": live_bytes, "blocks": dict(live), "freed": dict(freed),
                    "streams": dict(by_stream)}
    # Holes: free space between consecutive live blocks (addresses sorted) at the moment of the most excess.
    addrs = sorted(best["blocks"])
    holes = []
    for k in range(1, len(addrs)):
        prev_end = addrs[k - 1] + best["blocks"][addrs[k - 1]]
        gap = addrs[k] - prev_end
        if 0 < gap < 8 << 30:  # farther apart: another segment or unmapped address space
            holes.append((gap, best["blocks"][addrs[k - 1]], best["blocks"][addrs[k]], prev_end))
    # who made the holes: the blocks last freed inside each, by the place that allocated them
    free_addrs = sorted(best["freed"])
    makers, freers = {}, {}
    for gap, _, _, start in holes:
        lo = bisect.bisect_left(free_addrs, start)
        hi = bisect.bisect_left(free_addrs, start + gap)
        seen = 0
        for a in free_addrs[lo:hi]:
            size, at, fr = best["freed"][a]
            size = min(size, start + gap - a)
            where = frame_text(trace[at]) if at >= 0 else "(allocated before the recorded step)"
            makers[where] = makers.get(where, 0) + size
            where = frame_text(trace[fr]) if fr >= 0 else "(no free request recorded)"
            freers[where] = freers.get(where, 0) + size
            seen += size
        if gap > seen:
            makers["(never held a block in the recorded step)"] = makers.get("(never held a block in the recorded step)", 0) + gap - seen
    classes = []
    for lo, hi in CLASSES:
        h = [g for g in holes if lo <= g[0] < hi]
        classes.append({"from_mib": lo / MiB, "to_mib": hi / MiB, "count": len(h), "gib": sum(g[0] for g in h) / (1 << 30)})
    holes.sort(reverse=True)
    out = {
        "events": len(trace), "peak_live_gib": peak_live / (1 << 30), "peak_mapped_gib": peak_mapped / (1 << 30),
        "at_live_peak": {"event": best["at"], "of": len(trace), "mapped_gib": best["mapped"] / (1 << 30),
                        "live_gib": best["live"] / (1 << 30), "excess_gib": (best["mapped"] - best["live"]) / (1 << 30),
                        "holes_gib": sum(g[0] for g in holes) / (1 << 30), "holes": len(holes), "classes": classes,
                        "largest": [{"hole_mib": g / MiB, "below_mib": b / MiB, "above_mib": a / MiB}
                                    for g, b, a, _ in holes[:top]],
                        "made_by": [{"where": w, "gib": v / (1 << 30)}
                                    for w, v in sorted(makers.items(), key=lambda kv: -kv[1])[:top]],
                        "freed_at": [{"where": w, "gib": v / (1 << 30)}
                                     for w, v in sorted(freers.items(), key=lambda kv: -kv[1])[:top]],
                        "mapped_by_stream": [{"stream": s, "gib": v / (1 << 30)} for s, v in sorted(best["streams"].items())]},
    }
    if peak_map_at >= 0:
        j = peak_map_at
        while j + 1 < len(trace) and trace[j]["action"] != "alloc":  # the allocation the map was for
            j += 1
        out["mapped_peak_by"] = {"event": peak_map_at, "alloc_mib": trace[j]["size"] / MiB, "where": frame_text(trace[j])}
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("snapshot")
    ap.add_argument("--top", type=int, default=8, help="how many of the largest holes to list")
    ap.add_argument("--json", help="also write the result here")
    a = ap.parse_args()
    try:
        with open(a.snapshot, "rb") as f:
            snap = pickle.load(f)
    except (OSError, pickle.UnpicklingError, EOFError) as e:
        sys.exit("fragmentation: cannot read %s: %s" % (a.snapshot, e))
    if not snap.get("device_traces") or not snap["device_traces"][0]:
        sys.exit("fragmentation: %s has no allocator history (record it with _record_memory_history)" % a.snapshot)
    out = analyse(snap, a.top)
    m = out["at_live_peak"]
    print("%d events; peak live %.2f GiB, peak mapped %.2f GiB" % (out["events"], out["peak_live_gib"], out["peak_mapped_gib"]))
    print("at the live peak (event %d of %d): mapped %.2f GiB, live %.2f GiB, excess %.2f GiB; "
          "%d holes between live blocks, %.2f GiB" % (m["event"], m["of"], m["mapped_gib"], m["live_gib"], m["excess_gib"],
                                                      m["holes"], m["holes_gib"]))
    print("| hole size | count | GiB |\n|---|---|---|")
    for c in m["classes"]:
        print("| %g-%s MiB | %d | %.2f |" % (c["from_mib"], "%g" % c["to_mib"] if c["to_mib"] < 1 << 30 else "", c["count"], c["gib"]))
    for h in m["largest"]:
        print("  hole %.1f MiB between blocks of %.1f and %.1f MiB" % (h["hole_mib"], h["below_mib"], h["above_mib"]))
    for w in m["made_by"]:
        print("  %.2f GiB of holes last held blocks allocated at %s" % (w["gib"], w["where"]))
    for w in m["freed_at"]:
        print("  %.2f GiB of holes last held blocks freed at %s" % (w["gib"], w["where"]))
    for st in m["mapped_by_stream"]:
        print("  stream %s: %.2f GiB mapped" % (st["stream"], st["gib"]))
    if "mapped_peak_by" in out:
        p = out["mapped_peak_by"]
        print("the mapped peak came with an allocation of %.1f MiB at %s" % (p["alloc_mib"], p["where"]))
    if a.json:
        with open(a.json, "w") as f:
            json.dump(out, f, indent=1)


if __name__ == "__main__":
    main()
