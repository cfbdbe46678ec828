#!/usr/bin/env python3
"""Storage copies of the storage mover against plain pinned copies, and the allocator it runs on.

Table 1: for storages of 1 MiB to 1 GiB, the bandwidth of CudaTransport.to_host / to_device (python/tierpack/
copy_streams.py: pooled pinned buffer, stream waits, one event per copy; what a release or a fetch costs the copy
engine) against a plain pinned copy of the same bytes on a side stream, each way; the issue's target is >= 90% of
the plain copy from 8 MiB up. The mover twice: its copies through torch's Python API (copies:torch) and through
libtierpack_cuda.so (copies:raw, the default: Note [Raw copies]). Each: median over --repeats of a batch of copies
(16 MiB of copies at least), timed with CUDA events on the copy stream.

Table 1b: the host's time per copy issued (what the hooks pay), 64 KiB storages: one to_host / to_device_into per
storage, and to_host_many / to_device_many of 8 storages a call, copies:torch against copies:raw (median over
--repeats of 64 copies, the device idle).

Table 2: both ways at once, for the same sizes: a D2H copy on one stream and an H2D copy of as many bytes on
another, started together; the rate is the bytes of both directions over the time until both are done (what a
link's `both_ways_bytes_per_s` in a tiers file means, core/presets/h200-pcie.json). Plain pinned copies, and the
mover's to_host and to_device on its own two copy streams.

Table 3: one torch.empty + free pair (host time, the allocator's cost) with PyTorch's caching allocator as it
comes and with expandable_segments (what mechanism:storage sets), each in a fresh process.

Usage: python3 bench/gpu/storage_copy_bench.py [--repeats 20] [--lib build/lib/libtierpack_cuda.so] [--json out.json]
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))
MiB = 1 << 20


def copies(a):
    sys.path.insert(0, os.path.join(ROOT, "python"))
    import torch
    from tierpack import _native
    from tierpack.copy_streams import CudaTransport

    movers = {"torch": CudaTransport(torch, "cuda"), "raw": CudaTransport(torch, "cuda", _native.cuda_library(a.lib))}
    tr = movers["raw"]
    side = torch.cuda.Stream()
    rows = []
    for mib in (1, 2, 4, 8, 16, 64, 256, 1024):
        n = mib * MiB
        count = max(1, 16 // mib)
        dev = [torch.randint(0, 255, (n,), dtype=torch.uint8, device="cuda") for _ in range(count)]
        host = [torch.empty(n, dtype=torch.uint8, pin_memory=True) for _ in range(count)]
        host_in = [torch.randint(0, 255, (n,), dtype=torch.uint8).pin_memory() for _ in range(count)]
        res = {"mib": mib}
        for name, fn in (
            ("plain_d2h", lambda: [h.copy_(d, non_blocking=True) for h, d in zip(host, dev)]),
            ("plain_h2d", lambda: [d.copy_(h, non_blocking=True) for h, d in zip(host, dev)]),
        ):
            ts = []
            for _ in range(a.repeats):
                s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                side.wait_stream(torch.cuda.current_stream())
                with torch.cuda.stream(side):
                    s.record(side)
                    fn()
                    e.record(side)
                e.synchronize()
                ts.append(s.elapsed_time(e) / 1e3)
            res[name] = n * count / statistics.median(ts)
        # The mover's copies: to_host into the pool (buffers come back once their copy is over), to_device from it.
        for name, tr in (("torch_d2h", movers["torch"]), ("torch_h2d", movers["torch"]), ("mover_d2h", movers["raw"]),
                         ("mover_h2d", movers["raw"])):
            ts = []
            for _ in range(a.repeats):
                outs = []
                torch.cuda.synchronize()
                stream = tr.d2h if name.endswith("d2h") else tr.h2d
                s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                s.record(stream)
                if name.endswith("d2h"):
                    for d in dev:
                        outs.append(tr.to_host(d))
                else:
                    for h in host:
                        outs.append(tr.to_device(h, n))
                e.record(stream)
                e.synchronize()
                ts.append(s.elapsed_time(e) / 1e3)
                if name.endswith("d2h"):
                    for buf, ev in outs:
                        tr.give_back(buf, ev)
            res[name] = n * count / statistics.median(ts)
        # Both ways at once: each direction on its own stream, both started after one event and joined by another.
        back = [torch.empty(n, dtype=torch.uint8, device="cuda") for _ in range(count)]
        tr = movers["raw"]
        for name in ("plain_both", "mover_both"):
            ts = []
            for _ in range(a.repeats):
                torch.cuda.synchronize()
                outs = []
                one, two = (side, torch.cuda.Stream()) if name == "plain_both" else (tr.d2h, tr.h2d)
                s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                joined = torch.cuda.Event()
                s.record(one)
                two.wait_event(s)
                if name == "plain_both":
                    with torch.cuda.stream(one):
                        for h, d in zip(host, dev):
                            h.copy_(d, non_blocking=True)
                    with torch.cuda.stream(two):
                        for h, b in zip(host_in, back):
                            b.copy_(h, non_blocking=True)
                else:
                    for d in dev:
                        outs.append(tr.to_host(d))
                    for h in host_in:
                        tr.to_device(h, n)
                joined.record(two)
                one.wait_event(joined)
                e.record(one)
                e.synchronize()
                ts.append(s.elapsed_time(e) / 1e3)
                for buf, ev in outs:
                    tr.give_back(buf, ev)
            res[name] = 2 * n * count / statistics.median(ts)
        del back
        res["ratio_d2h"] = res["mover_d2h"] / res["plain_d2h"]
        res["ratio_h2d"] = res["mover_h2d"] / res["plain_h2d"]
        rows.append(res)
        del dev, host, host_in
    return rows, host_cost(a, torch, movers)


def host_cost(a, torch, movers, nbytes=64 << 10, count=64, batch=8):
    """Table 1b: host microseconds per copy issued, per transport and call."""
    dev = [torch.randint(0, 255, (nbytes,), dtype=torch.uint8, device="cuda") for _ in range(count)]
    back = [torch.empty(nbytes, dtype=torch.uint8, device="cuda") for _ in range(count)]
    out = {}
    for kind, tr in movers.items():
        for call in ("to_host", "to_host_many", "to_device_into", "to_device_many"):
            ts = []
            for _ in range(a.repeats):
                torch.cuda.synchronize()
                hosts = [tr.host_buffer(nbytes) for _ in range(count)] if call.startswith("to_device") else None
                t0 = time.perf_counter()
                if call == "to_host":
                    outs = [tr.to_host(d) for d in dev]
                elif call == "to_host_many":
                    outs = []
                    for i in range(0, count, batch):
                        hs, ev = tr.to_host_many(dev[i:i + batch])
                        outs += [(h, ev) for h in hs]
                elif call == "to_device_into":
                    outs = [tr.to_device_into(h, b) for h, b in zip(hosts, back)]
                else:
                    outs = []
                    for i in range(0, count, batch):
                        outs += tr.to_device_many([(h, nbytes, None) for h in hosts[i:i + batch]])
                ts.append((time.perf_counter() - t0) / count * 1e6)
                torch.cuda.synchronize()
                for (buf, ev), h in zip(outs, hosts or [None] * count):
                    tr.give_back(h if h is not None else buf, ev)
            out["%s_%s_us" % (kind, call)] = statistics.median(ts)
    return out


def alloc_child():
    import torch

    torch.ones(1, device="cuda")
    sizes = [512, 4096, 65536, MiB, 8 * MiB, 64 * MiB]
    out = {}
    for size in sizes:
        for _ in range(200):
            del_me = torch.empty(size, dtype=torch.uint8, device="cuda")
            del del_me
        n = 20000 if size <= MiB else 2000
        t0 = time.perf_counter()
        for _ in range(n):
            t = torch.empty(size, dtype=torch.uint8, device="cuda")
            del t
        out[str(size)] = (time.perf_counter() - t0) / n * 1e6
    print("RESULT " + json.dumps(out))


def alloc(conf):
    env = dict(os.environ)
    env.pop("PYTORCH_CUDA_ALLOC_CONF", None)
    if conf:
        env["PYTORCH_CUDA_ALLOC_CONF"] = conf
    p = subprocess.run([sys.executable, os.path.abspath(__file__), "--alloc-child"], capture_output=True, text=True,
                       env=env, timeout=300)
    for line in p.stdout.splitlines():
        if line.startswith("RESULT "):
            return json.loads(line[7:])
    raise SystemExit("alloc child failed: " + p.stderr[-2000:])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeats", type=int, default=20)
    ap.add_argument("--json")
    ap.add_argument("--lib", default=os.environ.get("TIERPACK_CUDA_LIB", os.path.join(ROOT, "build", "lib",
                                                                                     "libtierpack_cuda.so")))
    ap.add_argument("--alloc-child", action="store_true", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.alloc_child:
        return alloc_child()
    rows, host = copies(a)
    print("| storage | plain D2H GB/s | mover D2H, torch's calls | mover D2H, raw (ratio) | plain H2D GB/s | "
          "mover H2D, torch's calls | mover H2D, raw (ratio) |")
    print("|---|---|---|---|---|---|---|")
    for r in rows:
        print("| %d MiB | %.1f | %.1f | %.1f (%.2f) | %.1f | %.1f | %.1f (%.2f) |" % (
            r["mib"], r["plain_d2h"] / 1e9, r["torch_d2h"] / 1e9, r["mover_d2h"] / 1e9, r["ratio_d2h"],
            r["plain_h2d"] / 1e9, r["torch_h2d"] / 1e9, r["mover_h2d"] / 1e9, r["ratio_h2d"]))
    print("\n| call (64 KiB storages) | host us per copy, torch's calls | raw | ratio |")
    print("|---|---|---|---|")
    for call in ("to_host", "to_host_many", "to_device_into", "to_device_many"):
        t, r = host["torch_%s_us" % call], host["raw_%s_us" % call]
        print("| %s | %.1f | %.1f | %.2f |" % (call + (" (8 a call)" if call.endswith("many") else ""), t, r, r / t))
    print("\n| storage | plain both ways GB/s | mover both ways GB/s | ratio | plain both / plain D2H + H2D |")
    print("|---|---|---|---|---|")
    for r in rows:
        print("| %d MiB | %.1f | %.1f | %.2f | %.2f |" % (
            r["mib"], r["plain_both"] / 1e9, r["mover_both"] / 1e9, r["mover_both"] / r["plain_both"],
            r["plain_both"] / (r["plain_d2h"] + r["plain_h2d"])))
    base, expandable = alloc(""), alloc("expandable_segments:True")
    print("\n| allocation | caching allocator us/pair | with expandable_segments us/pair | ratio |")
    print("|---|---|---|---|")
    for k in base:
        print("| %s B | %.2f | %.2f | %.2f |" % (k, base[k], expandable[k], expandable[k] / base[k]))
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"copies": rows, "host_us_per_copy": host, "alloc_default_us": base,
                       "alloc_expandable_us": expandable}, f, indent=1)


if __name__ == "__main__":
    main()
