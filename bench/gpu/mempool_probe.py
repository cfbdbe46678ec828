#!/usr/bin/env python3
"""Whether torch.cuda.MemPool works under expandable segments on this torch, and where its blocks go.

Allocates a few blocks in the default pool and a few inside ``torch.cuda.use_mem_pool``, frees the pool's, and
prints the segments the allocator reports (pool id, stream, expandable or not, size) and its reserved bytes before
and after ``empty_cache``. A probe for a per-class device pool (issue 22: "torch.cuda.MemPool per class, if
page-aware segments pay"); prints facts only.

Usage: PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True python3 bench/gpu/mempool_probe.py
"""

import os
import sys


def main():
    import torch
    if not torch.cuda.is_available():
        sys.exit("mempool_probe: no CUDA device")
    print("torch", torch.__version__, "PYTORCH_CUDA_ALLOC_CONF=%s" % os.environ.get("PYTORCH_CUDA_ALLOC_CONF", ""))
    MiB = 1 << 20
    keep = [torch.empty(64 * MiB, dtype=torch.uint8, device="cuda") for _ in range(3)]
    try:
        pool = torch.cuda.MemPool()
    except Exception as e:  # noqa: BLE001 - the probe reports what this torch does
        sys.exit("mempool_probe: torch.cuda.MemPool(): %s: %s" % (type(e).__name__, e))
    try:
        with torch.cuda.use_mem_pool(pool):
            tmp = [torch.empty(80 * MiB, dtype=torch.uint8, device="cuda") for _ in range(4)]
            tmp[1].fill_(1)
    except Exception as e:  # noqa: BLE001
        sys.exit("mempool_probe: use_mem_pool: %s: %s" % (type(e).__name__, e))
    keep.append(torch.empty(64 * MiB, dtype=torch.uint8, device="cuda"))
    torch.cuda.synchronize()
    def show(when):
        print("%s: reserved %.0f MiB, allocated %.0f MiB" % (when, torch.cuda.memory_reserved() / MiB,
                                                             torch.cuda.memory_allocated() / MiB))
        for s in torch.cuda.memory._snapshot()["segments"]:
            print("  segment pool %s stream %s expandable %s total %.0f MiB allocated %.0f MiB" % (
                s.get("segment_pool_id"), s.get("stream"), s.get("is_expandable"), s["total_size"] / MiB,
                s["allocated_size"] / MiB))
    show("with 4 x 80 MiB in the pool and 4 x 64 MiB outside")
    try:
        print("pool snapshot segments:", len(pool.snapshot()), "use_count", pool.use_count())
    except Exception as e:  # noqa: BLE001
        print("pool.snapshot/use_count:", type(e).__name__, e)
    del tmp
    torch.cuda.synchronize()
    show("after freeing the pool's blocks")
    torch.cuda.empty_cache()
    show("after empty_cache")
    # reuse: the pool's free space serves the next allocations made inside it, not outside
    with torch.cuda.use_mem_pool(pool):
        again = torch.empty(80 * MiB, dtype=torch.uint8, device="cuda")
    show("one 80 MiB block in the pool again")
    del again, keep
    print("ok")


if __name__ == "__main__":
    main()
