#!/usr/bin/env python3
"""Where a profiled step's time went, phase by phase: forward, backward, optimizer step.

Reads a Chrome trace that torch.profiler wrote (models_bench.py --profile <path>.json keeps one per cell; .json.gz
is read too) and prints, for each phase, its GPU span, the compute stream's busy and idle time, each copy
direction's busy time, bytes and rate, and the compute stream's largest idle gaps with what the copy streams did
during them. A kernel's phase is the host thread and time of the launch that queued it: the optimizer step is
the host's `Optimizer.step` annotation (tierpack's streamed step runs inside it), the backward is what autograd's
device thread launched, the rest of the main thread's launches are the forward. Copies take the phase of the
compute stream's kernel running when they started (or the last one before).

Usage: python3 bench/gpu/trace_phases.py TRACE.json[.gz] [--gaps 12] [--json out.json]
"""

import argparse
import bisect
import gzip
import json
import sys

PHASES = ("forward", "backward", "optimizer")


def load(path):
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt") as f:
        return json.load(f)["traceEvents"]


def union(spans):
    """Total length of the union of (start, end) spans."""
    total, end = 0.0, None
    for a, b in sorted(spans):
        if end is None or a > end:
            total += b - a
            end = b
        elif b > end:
            total += b - end
            end = b
    return total


def overlap(spans, lo, hi):
    """Length of the union of spans within [lo, hi]."""
    return union([(max(a, lo), min(b, hi)) for a, b in spans if b > lo and a < hi])


def analyse(evs, n_gaps=12):
    launches = {}  # correlation -> (tid, ts) of the runtime call that queued it
    opt_spans, main_tid, tids = [], None, {}
    for e in evs:
        if e.get("ph") != "X":
            continue
        cat = e.get("cat", "")
        if cat == "cuda_runtime" or cat == "cuda_driver":
            c = (e.get("args") or {}).get("correlation")
            if c is not None:
                launches[c] = (e.get("tid"), e["ts"])
            tids[e.get("tid")] = tids.get(e.get("tid"), 0) + 1
        elif cat == "user_annotation" and e.get("name", "").startswith("Optimizer.step"):
            opt_spans.append((e["ts"], e["ts"] + e["dur"], e.get("tid")))
    if opt_spans:
        main_tid = opt_spans[0][2]
    elif tids:
        main_tid = max(tids, key=tids.get)

    def phase_of(corr):
        tid, ts = launches.get(corr, (None, None))
        if ts is None:
            return None
        if any(a <= ts <= b for a, b, _ in opt_spans):
            return "optimizer"
        return "forward" if tid == main_tid else "backward"

    gpu = []  # (start, end, stream, kind, bytes, phase, name)
    for e in evs:
        if e.get("ph") != "X" or e.get("cat") not in ("kernel", "gpu_memcpy", "gpu_memset"):
            continue
        args = e.get("args") or {}
        name = e.get("name", "")
        kind = "kernel" if e["cat"] == "kernel" else ("d2h" if ("DtoH" in name or "Device -> Pinned" in name) else
                                                       "h2d" if ("HtoD" in name or "Pinned -> Device" in name) else
                                                       e["cat"])
        gpu.append((e["ts"], e["ts"] + e["dur"], args.get("stream"), kind, args.get("bytes", 0),
                    phase_of(args.get("correlation")), name))
    if not gpu:
        raise SystemExit("trace_phases: the trace holds no GPU events (was CUDA profiled?)")
    counts = {}
    for g in gpu:
        if g[3] == "kernel":
            counts[g[2]] = counts.get(g[2], 0) + 1
    comp = max(counts, key=counts.get)
    kern = sorted((g for g in gpu if g[2] == comp), key=lambda g: g[0])
    starts = [g[0] for g in kern]

    def phase_at(ts):
        i = bisect.bisect_right(starts, ts) - 1
        return kern[max(i, 0)][5] or "forward"

    rows, per = [], {}
    for g in gpu:
        ph = g[5] if g[2] == comp else phase_at(g[0])
        per.setdefault(ph or "forward", []).append(g)
    lo, hi = min(g[0] for g in gpu), max(g[1] for g in gpu)
    for ph in PHASES:
        gs = per.get(ph, [])
        if not gs:
            continue
        c = [(g[0], g[1]) for g in gs if g[2] == comp]
        a, b = min(g[0] for g in gs), max(g[1] for g in gs)
        row = {"phase": ph, "span_ms": (b - a) / 1e3, "compute_busy_ms": union(c) / 1e3,
               "compute_kernels": len(c)}
        row["compute_idle_ms"] = row["span_ms"] - row["compute_busy_ms"]
        for d in ("d2h", "h2d"):
            s = [(g[0], g[1]) for g in gs if g[3] == d]
            by = sum(g[4] for g in gs if g[3] == d)
            busy = union(s) / 1e3
            row[d + "_busy_ms"], row[d + "_gb"], row[d + "_copies"] = busy, by / 1e9, len(s)
            row[d + "_gbps"] = by / 1e9 / (busy / 1e3) if busy > 0 else 0.0
        rows.append(row)
    d2h = [(g[0], g[1]) for g in gpu if g[3] == "d2h"]
    h2d = [(g[0], g[1]) for g in gpu if g[3] == "h2d"]
    both = 0.0
    for a, b in d2h:  # time both directions ran at once
        both += overlap(h2d, a, b)
    gaps, end = [], None
    for g in kern:
        if end is not None and g[0] > end:
            gaps.append((g[0] - end, end, g[0], g[5] or "forward"))
        end = g[1] if end is None else max(end, g[1])
    gaps.sort(reverse=True)
    top = [{"gap_ms": gp / 1e3, "at_ms": (a - lo) / 1e3, "phase": ph,
            "d2h_busy_ms": overlap(d2h, a, b) / 1e3, "h2d_busy_ms": overlap(h2d, a, b) / 1e3}
           for gp, a, b, ph in gaps[:n_gaps]]
    return {"gpu_span_ms": (hi - lo) / 1e3, "compute_stream": comp, "phases": rows,
            "compute_idle_ms": (hi - lo - union([(g[0], g[1]) for g in kern])) / 1e3,
            "idle_gaps_over_0.1ms": [len([g for g in gaps if g[0] > 100]), sum(g[0] for g in gaps if g[0] > 100) / 1e3],
            "both_ways_ms": both / 1e3, "largest_gaps": top}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("trace")
    ap.add_argument("--gaps", type=int, default=12)
    ap.add_argument("--json")
    a = ap.parse_args()
    try:
        evs = load(a.trace)
    except (OSError, ValueError, KeyError) as e:
        sys.exit("trace_phases: cannot read %s: %s" % (a.trace, e))
    r = analyse(evs, a.gaps)
    print("# %s: GPU span %.1f ms, compute stream %s idle %.1f ms (%d gaps over 0.1 ms, %.1f ms); both copy "
          "directions at once %.1f ms" % (a.trace, r["gpu_span_ms"], r["compute_stream"], r["compute_idle_ms"],
                                         r["idle_gaps_over_0.1ms"][0], r["idle_gaps_over_0.1ms"][1], r["both_ways_ms"]))
    print("| phase | span ms | compute busy ms | compute idle ms | kernels | D2H busy ms | D2H GB | D2H GB/s | "
          "H2D busy ms | H2D GB | H2D GB/s |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for p in r["phases"]:
        print("| %s | %.1f | %.1f | %.1f | %d | %.1f | %.2f | %.1f | %.1f | %.2f | %.1f |" % (
            p["phase"], p["span_ms"], p["compute_busy_ms"], p["compute_idle_ms"], p["compute_kernels"],
            p["d2h_busy_ms"], p["d2h_gb"], p["d2h_gbps"], p["h2d_busy_ms"], p["h2d_gb"], p["h2d_gbps"]))
    print("largest compute-stream gaps (ms, at ms from the first GPU event, phase, D2H / H2D busy in the gap):")
    for g in r["largest_gaps"]:
        print("  %.2f at %.1f %s  d2h %.2f h2d %.2f" % (g["gap_ms"], g["at_ms"], g["phase"], g["d2h_busy_ms"],
                                                       g["h2d_busy_ms"]))
    if a.json:
        with open(a.json, "w") as f:
            json.dump(r, f, indent=1)


if __name__ == "__main__":
    main()
