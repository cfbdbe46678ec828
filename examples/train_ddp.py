#!/usr/bin/env python3
"""The embedded CPU example (examples/train_cpu.py's model) trained data-parallel: DistributedDataParallel
on the gloo backend, one process per rank, started by torchrun. Needs nothing from the network.

    torchrun --nproc_per_node 2 examples/train_ddp.py
    tierpack profile --warmup 2 -o out.%r.tpk -- torchrun --nproc_per_node 2 examples/train_ddp.py     # one profile per rank
    torchrun --nproc_per_node 2 --no_python tierpack profile -o out.%r.tpk -- /usr/bin/python3 examples/train_ddp.py

Every rank prints "rank R iter I loss L". Ranks see different data (seeded by rank); DDP averages the
gradients, so the parameters stay identical on every rank (checked at the end: "rank R params <sum>").
Options: --iters N (default 6), --batch B, --seq T.
"""
import argparse
import os
import sys

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from train_cpu import Model  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--iters", type=int, default=6)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--seq", type=int, default=32)
    args = ap.parse_args()

    dist.init_process_group("gloo")  # env:// from torchrun (MASTER_ADDR, RANK, WORLD_SIZE)
    rank = dist.get_rank()
    torch.manual_seed(0)  # same initial parameters on every rank
    torch.set_num_threads(1)
    model = DistributedDataParallel(Model())
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    gen = torch.Generator().manual_seed(1 + rank)
    for it in range(args.iters):
        tokens = torch.randint(0, 256, (args.batch, args.seq), generator=gen)
        labels = torch.randint(0, 10, (args.batch,), generator=gen)
        opt.zero_grad()
        loss = F.cross_entropy(model(tokens), labels)
        loss.backward()
        opt.step()
        print("rank %d iter %d loss %.6f" % (rank, it, loss.item()), flush=True)
    with torch.no_grad():
        total = sum(p.double().sum().item() for p in model.parameters())
    print("rank %d params %.10f" % (rank, total), flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
