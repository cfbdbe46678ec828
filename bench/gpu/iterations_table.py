#!/usr/bin/env python3
"""Prints, for each tierpack cell of a models_bench --json file, one line per iteration: its mode, wall time, the
hooks' host time, the pinned memory it added and the bytes it moved, the streamed optimizer step's chunks and host
time (Note [Streamed step] in python/tierpack/optimizer_state.py), the allocator's retries (Note [Allocator retries] in
python/tierpack/reserved_memory.py), and its GPU span (the mover's step_ms: Note
[Measured plans] in python/tierpack/measured_plans.py). Usage: iterations_table.py FILE.json..."""
import json
import sys


def main(paths):
    for path in paths:
        with open(path) as f:
            doc = json.load(f)
        for cell in doc.get("results", []):
            tp = cell.get("tierpack") or {}
            its = tp.get("iterations") or []
            if not its:
                continue
            walls = list(cell.get("warmup_step_s") or []) + list(cell.get("step_s") or [])
            print(f"# {cell['model']} {cell['mode']} budget {cell['budget'] / 2**30:.1f} GiB")
            print("| it | mode | wall ms | GPU span ms | hook host ms | pinned new GB | GB out | GB remade | blocks | "
                  "step chunks | step host ms | alloc retries |")
            print("|---|---|---|---|---|---|---|---|---|---|---|---|")
            for k, it in enumerate(its):
                wall = f"{walls[k] * 1e3:.0f}" if k < len(walls) else "-"
                span = f"{it['step_ms']:.0f}" if it.get("step_ms") is not None else "-"
                print(f"| {it.get('iteration', k + 1)} | {it.get('mode', '?')} | {wall} | {span} | "
                      f"{it.get('host_ms', 0):.0f} | "
                      f"{it.get('pinned_new', 0) / 1e9:.2f} | {it.get('bytes_out', 0) / 1e9:.2f} | "
                      f"{it.get('bytes_recomputed', 0) / 1e9:.2f} | {it.get('block_runs', 0)} | "
                      f"{it.get('step_chunks', 0)} | {it.get('step_host_ms', 0):.1f} | {it.get('alloc_retries', '-')} |")


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit("iterations_table.py: give one or more models_bench --json files")
    main(sys.argv[1:])
