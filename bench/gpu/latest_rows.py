#!/usr/bin/env python3
"""Merge a results folder's table rows into bench/results/gpu-latest.json.

gpu-latest.json holds the newest row of each cell: one per (model, mode, budget_pct, budget_of, gpu_options,
deterministic, gpu). A row of an input replaces the row of the same cell; rows of another GPU never replace each other (H100
and H200 steps do not compare), so both stay, each naming its `gpu`. Each merged row gains `results_dir` (the
input's folder under bench/results) and `source` (the input's file name). Inputs are the `call<N>_rows.json`
files a results folder keeps beside its README (lists of models_bench.py rows); every row must name its model,
mode, commit and gpu, or nothing is written. A failed row (a cell that gave no step) is left out, and the
cell keeps the row it had.

Usage: python3 bench/gpu/latest_rows.py ROWS.json [ROWS.json ...] [--latest bench/results/gpu-latest.json]
"""

import argparse
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
LATEST = os.path.normpath(os.path.join(HERE, "..", "results", "gpu-latest.json"))
NEEDED = ("model", "mode", "commit", "gpu")


def cell(row):
    return (row.get("model"), row.get("mode"), row.get("budget_pct"), row.get("budget_of"),
            row.get("gpu_options") or row.get("gpu_limit"), bool(row.get("deterministic")), row.get("gpu"))


def read_rows(path):
    try:
        with open(path) as f:
            rows = json.load(f)
    except (OSError, ValueError) as e:
        sys.exit("latest_rows: cannot read %s: %s" % (path, e))
    if not isinstance(rows, list):
        sys.exit("latest_rows: %s: expected a list of rows" % path)
    for i, r in enumerate(rows):
        if not isinstance(r, dict):
            sys.exit("latest_rows: %s: row %d is not an object" % (path, i))
        if r.get("failed"):
            continue  # (merge leaves it out)
        for k in NEEDED:
            if not r.get(k):
                sys.exit("latest_rows: %s: row %d (%s %s) has no %s" % (path, i, r.get("model"), r.get("mode"), k))
    return rows


def merge(latest, inputs):
    """latest: the rows now; inputs: [(results_dir, source, rows)], oldest first. Returns (rows, replaced, added,
    failed rows left out)."""
    index = {cell(r): i for i, r in enumerate(latest)}
    out, replaced, added, failed = list(latest), 0, 0, 0
    for results_dir, source, rows in inputs:
        for r in rows:
            if r.get("failed"):  # a cell that gave no step keeps the row it had
                failed += 1
                continue
            r = dict(r, results_dir=results_dir, source=source)
            k = cell(r)
            if k in index:
                out[index[k]] = r
                replaced += 1
            else:
                index[k] = len(out)
                out.append(r)
                added += 1
    return out, replaced, added, failed


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("rows", nargs="+", help="call<N>_rows.json files, oldest first")
    ap.add_argument("--latest", default=LATEST)
    a = ap.parse_args()
    inputs = [(os.path.basename(os.path.dirname(os.path.abspath(p))), os.path.basename(p), read_rows(p))
              for p in a.rows]
    latest = read_rows(a.latest) if os.path.exists(a.latest) else []
    rows, replaced, added, failed = merge(latest, inputs)
    with open(a.latest, "w") as f:
        json.dump(rows, f, indent=1)
        f.write("\n")
    print("latest_rows: %s: %d rows (%d replaced, %d added, %d failed rows left out, from %d files)" % (
        a.latest, len(rows), replaced, added, failed, len(inputs)))


if __name__ == "__main__":
    main()
