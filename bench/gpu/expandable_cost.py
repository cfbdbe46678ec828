#!/usr/bin/env python3
"""What giving PyTorch's cached memory back and taking it again costs, under expandable segments.

A storage-moving run leaves free blocks mapped between live ones (Note [Reserved memory] in
python/tierpack/reserved_memory.py); giving them back (``torch.cuda.empty_cache()``, or the allocator itself
when a memory fraction is set and reached) unmaps their pages, and a later allocation maps pages again.
This prints, per GiB: the time of ``empty_cache()`` over a segment with holes (host, with its stream
synchronisation), and the time of allocations that must map new pages (host time of ``torch.empty`` and
the wall time to a synchronised first write).

Usage: PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True python3 bench/gpu/expandable_cost.py [--gib 8] [--chunk-mib 64]
"""

import argparse
import os
import statistics
import time

import torch


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--gib", type=float, default=8.0, help="memory held as chunks, half of it freed to make holes")
    ap.add_argument("--chunk-mib", type=int, default=64)
    ap.add_argument("--repeats", type=int, default=5)
    a = ap.parse_args()
    conf = os.environ.get("PYTORCH_CUDA_ALLOC_CONF", "")
    dev = torch.device("cuda")
    chunk = a.chunk_mib << 20
    n = int(a.gib * (1 << 30) // chunk)
    unmap_ms, map_host_ms, map_wall_ms, reuse_wall_ms = [], [], [], []
    for _ in range(a.repeats):
        torch.cuda.empty_cache()
        keep = [torch.empty(chunk, dtype=torch.uint8, device=dev) for _ in range(n)]
        holes = keep[1::2]
        keep = keep[0::2]
        freed = len(holes) * chunk
        del holes  # every other chunk: holes that stay mapped
        torch.cuda.synchronize()
        # taking cached (mapped) memory again: no mapping
        t0 = time.perf_counter()
        again = [torch.empty(chunk, dtype=torch.uint8, device=dev) for _ in range(n // 2)]
        for t in again:
            t[0] = 1
        torch.cuda.synchronize()
        reuse_wall_ms.append((time.perf_counter() - t0) * 1e3 / (freed / (1 << 30)))
        del again
        torch.cuda.synchronize()
        reserved = torch.cuda.memory_reserved(dev)
        t0 = time.perf_counter()
        torch.cuda.empty_cache()  # unmaps the holes' pages
        unmap_ms.append((time.perf_counter() - t0) * 1e3 / (max(reserved - torch.cuda.memory_reserved(dev), 1) / (1 << 30)))
        # one allocation as large as the holes together: new pages must be mapped
        t0 = time.perf_counter()
        big = torch.empty(freed, dtype=torch.uint8, device=dev)
        t1 = time.perf_counter()
        big[0] = 1
        torch.cuda.synchronize()
        t2 = time.perf_counter()
        map_host_ms.append((t1 - t0) * 1e3 / (freed / (1 << 30)))
        map_wall_ms.append((t2 - t0) * 1e3 / (freed / (1 << 30)))
        del big, keep
    med = statistics.median
    print("PYTORCH_CUDA_ALLOC_CONF=%r, %s, torch %s: %.1f GiB in %d MiB chunks, every other freed; median of %d"
          % (conf, torch.cuda.get_device_name(dev), torch.__version__, a.gib, a.chunk_mib, a.repeats))
    print("| what | ms per GiB |")
    print("|---|---|")
    print("| empty_cache() unmapping holes | %.2f |" % med(unmap_ms))
    print("| allocating into new pages (host) | %.2f |" % med(map_host_ms))
    print("| allocating into new pages, to a synchronised first write | %.2f |" % med(map_wall_ms))
    print("| allocating into cached holes, to a synchronised first write | %.2f |" % med(reuse_wall_ms))


if __name__ == "__main__":
    main()
