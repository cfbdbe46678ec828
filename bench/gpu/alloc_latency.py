#!/usr/bin/env python3
"""malloc+free pair latency seen from PyTorch: `x = torch.empty(n, device="cuda"); del x` in a loop,
with PyTorch's caching allocator and with tierpack's pluggable allocator (same Python overhead in
both). Each allocator runs in its own process. Prints one table (ns per pair, median of 5 runs).

Usage: python3 bench/gpu/alloc_latency.py [--lib build/lib/libtierpack_cuda.so] [--n 20000]
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
SIZES = [512, 64 << 10, 1 << 20, 16 << 20, 256 << 20]


def child(mode, lib, n):
    if mode == "tierpack":
        sys.path.insert(0, os.path.join(ROOT, "python"))
        import tierpack.cuda as tc
        tc.install(path=lib, gpu="mechanism:vmm,migrate:off")
    import torch
    torch.ones(1, device="cuda")
    out = {}
    for size in SIZES:
        runs = []
        for _ in range(5):
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            for _ in range(n):
                x = torch.empty(size, dtype=torch.uint8, device="cuda")
                del x
            runs.append((time.perf_counter() - t0) / n * 1e9)
        out[size] = statistics.median(runs)
    print("RESULT " + json.dumps(out))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--child")
    ap.add_argument("--lib", default=os.path.join(ROOT, "build", "lib", "libtierpack_cuda.so"))
    ap.add_argument("--n", type=int, default=20000)
    a = ap.parse_args()
    if a.child:
        return child(a.child, a.lib, a.n)
    res = {}
    for mode in ("pytorch", "tierpack"):
        p = subprocess.run([sys.executable, __file__, "--child", mode, "--lib", a.lib, "--n", str(a.n)],
                           capture_output=True, text=True, timeout=600)
        line = [l for l in p.stdout.splitlines() if l.startswith("RESULT ")]
        res[mode] = json.loads(line[0][7:]) if line else {"error": p.stderr[-2000:]}
    print("| size | PyTorch caching allocator ns/pair | tierpack ns/pair | ratio |")
    print("|---|---|---|---|")
    for s in SIZES:
        a_, b_ = res["pytorch"].get(str(s)), res["tierpack"].get(str(s))
        if a_ is None or b_ is None:
            print(f"| {s} | {a_} | {b_} | - |")
        else:
            print(f"| {s} | {a_:.0f} | {b_:.0f} | {b_ / a_:.2f} |")
    for k, v in res.items():
        if "error" in v:
            print(f"{k} failed: {v['error']}", file=sys.stderr)


if __name__ == "__main__":
    main()
