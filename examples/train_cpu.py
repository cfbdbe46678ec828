#!/usr/bin/env python3
"""A small CPU training run that needs nothing from the network: token embedding, one transformer
block and an MLP head, AdamW, fixed seed, random data. tierpack's embedded example:

    tierpack profile -o run.tpk -- /usr/bin/python3 examples/train_cpu.py
    tierpack profile --summary run.tpk

Options: --iters N (default 6), --batch B, --seq T, --timings (print per-iteration wall times as one
JSON line at the end), --truth FILE (write what torch knows about the model: parameter sizes, for tests).
"""
import argparse
import json
import time

import torch
import torch.nn as nn
import torch.nn.functional as F


class Block(nn.Module):
    """Pre-norm transformer block: self-attention + feed-forward, written out so its ops are plain."""

    def __init__(self, d, heads, ff):
        super().__init__()
        self.heads = heads
        self.norm1 = nn.LayerNorm(d)
        self.qkv = nn.Linear(d, 3 * d)
        self.proj = nn.Linear(d, d)
        self.norm2 = nn.LayerNorm(d)
        self.ff1 = nn.Linear(d, ff)
        self.ff2 = nn.Linear(ff, d)

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = self.qkv(self.norm1(x)).chunk(3, dim=-1)
        split = lambda z: z.view(b, t, self.heads, d // self.heads).transpose(1, 2)  # noqa: E731
        q, k, v = split(q), split(k), split(v)
        att = torch.softmax(q @ k.transpose(-2, -1) / (d // self.heads) ** 0.5, dim=-1)
        y = (att @ v).transpose(1, 2).reshape(b, t, d)
        x = x + self.proj(y)
        return x + self.ff2(F.gelu(self.ff1(self.norm2(x))))


class Model(nn.Module):
    def __init__(self, vocab=256, d=64, heads=4, ff=128, classes=10):
        super().__init__()
        self.embed = nn.Embedding(vocab, d)
        self.block = Block(d, heads, ff)
        self.mlp = nn.Sequential(nn.Linear(d, 128), nn.ReLU(), nn.Linear(128, classes))

    def forward(self, tokens):
        return self.mlp(self.block(self.embed(tokens)).mean(dim=1))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--iters", type=int, default=6)
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--seq", type=int, default=32)
    ap.add_argument("--timings", action="store_true")
    ap.add_argument("--truth", default="")
    args = ap.parse_args()

    torch.manual_seed(0)
    torch.set_num_threads(1)  # deterministic op order and timings on a shared machine
    model = Model()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    gen = torch.Generator().manual_seed(1)
    times = []
    for it in range(args.iters):
        start = time.perf_counter()
        tokens = torch.randint(0, 256, (args.batch, args.seq), generator=gen)
        labels = torch.randint(0, 10, (args.batch,), generator=gen)
        opt.zero_grad()
        loss = F.cross_entropy(model(tokens), labels)
        loss.backward()
        opt.step()
        times.append(time.perf_counter() - start)
        print("iter %d loss %.6f" % (it, loss.item()), flush=True)
    if args.timings:
        print(json.dumps({"iteration_s": times}))
    if args.truth:
        with open(args.truth, "w") as f:
            json.dump({"parameter_bytes": [p.numel() * p.element_size() for p in model.parameters()],
                       "optimizer_state_tensors": sum(
                           sum(1 for v in s.values() if torch.is_tensor(v)) for s in opt.state.values()),
                       "torch": torch.__version__}, f)


if __name__ == "__main__":
    main()
