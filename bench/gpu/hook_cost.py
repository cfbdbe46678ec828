#!/usr/bin/env python3
"""The storage mover's host cost per hook call, on the CPU: its pack/unpack hooks and the global module hooks.

A T5-style encoder-decoder of many tiny modules (Python-arithmetic RMSNorm and NewGELU, Linear, Dropout, small
tensors) trains for --iterations under the storage mover (python/tierpack/activations.py, Note [Storage moves])
with the test transport and pretend device of tests/integrations/python/storage_mover_test.py and the real
planner (libtierpack_cuda.so's C ABI), at a budget of --budget of the recorded live peak, so the plan copies
storages out and makes others again (Note [Recipes], Note [Module recompute]). Per phase (warm-up, recorded,
timed, planned): the traced calls per iteration; the pack/unpack hooks' host time (counters.host_ms: every pack
and unpack, small storages too, with the copies and recomputations they start) per traced call (counters.calls),
and without that work (own_us: the transport's calls and recomputation timed here; on a GPU the host only
queues them); the global module hooks' time per hook (two per module call); the wall time per iteration,
against the same model trained with no hooks. Python's collector runs between iterations only (one inside a
hook counted its whole time there). On the H200 a T5-style model made ~5500 calls per iteration at 60-85 us
each (the step's ~220 ms became host-bound).

Usage: TIERPACK_CUDA_LIB=build/lib/libtierpack_cuda.so /usr/bin/python3 bench/gpu/hook_cost.py
         [--iterations 16] [--layers 6] [--d 64] [--batch 4] [--seq 32] [--budget 0.6] [--profile 20]
         [--profile-sort tottime|cumulative|ncalls] [--profile-only REGEX]
         [--gc off|on|freeze] [--ballast N]
"""

import argparse
import cProfile
import gc
import os
import pstats
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "tests", "integrations", "python"))

import torch  # noqa: E402
import torch.nn as nn  # noqa: E402

from storage_mover_test import LIB, PyGELU, make_mover  # noqa: E402


class RMSNorm(nn.Module):
    """T5's layer norm: Python arithmetic (run again by module recompute)."""

    def __init__(self, d):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(d))

    def forward(self, x):
        return self.weight * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6))


class Attention(nn.Module):
    def __init__(self, d, heads, p):
        super().__init__()
        self.heads = heads
        self.q, self.k, self.v, self.o = (nn.Linear(d, d, bias=False) for _ in range(4))
        self.drop = nn.Dropout(p)

    def forward(self, x, kv):
        b, s, d = x.shape

        def split(t):
            return t.reshape(b, -1, self.heads, d // self.heads).transpose(1, 2)

        q, k, v = split(self.q(x)), split(self.k(kv)), split(self.v(kv))
        w = self.drop(torch.softmax(q @ k.transpose(-1, -2), dim=-1))
        return self.o((w @ v).transpose(1, 2).reshape(b, s, d))


class FeedForward(nn.Module):
    def __init__(self, d, p):
        super().__init__()
        self.wi, self.act, self.drop, self.wo = nn.Linear(d, 4 * d, bias=False), PyGELU(), nn.Dropout(p), \
            nn.Linear(4 * d, d, bias=False)

    def forward(self, x):
        return self.wo(self.drop(self.act(self.wi(x))))


class Layer(nn.Module):
    """A T5 layer: self-attention, cross-attention (decoder), feed-forward; each pre-normed, residual."""

    def __init__(self, d, heads, p, cross):
        super().__init__()
        self.n1, self.attn, self.d1 = RMSNorm(d), Attention(d, heads, p), nn.Dropout(p)
        self.cross = cross
        if cross:
            self.n2, self.xattn, self.d2 = RMSNorm(d), Attention(d, heads, p), nn.Dropout(p)
        self.n3, self.ff, self.d3 = RMSNorm(d), FeedForward(d, p), nn.Dropout(p)

    def forward(self, x, enc=None):
        h = self.n1(x)
        x = x + self.d1(self.attn(h, h))
        if self.cross:
            x = x + self.d2(self.xattn(self.n2(x), enc))
        return x + self.d3(self.ff(self.n3(x)))


class T5ish(nn.Module):
    def __init__(self, d, layers, heads=4, p=0.1, vocab=128):
        super().__init__()
        self.embed = nn.Embedding(vocab, d)
        self.enc = nn.ModuleList(Layer(d, heads, p, False) for _ in range(layers))
        self.dec = nn.ModuleList(Layer(d, heads, p, True) for _ in range(layers))
        self.enc_norm, self.dec_norm = RMSNorm(d), RMSNorm(d)
        self.head = nn.Linear(d, vocab, bias=False)

    def forward(self, src, tgt):
        x = self.embed(src)
        for layer in self.enc:
            x = layer(x)
        enc = self.enc_norm(x)
        y = self.embed(tgt)
        for layer in self.dec:
            y = layer(y, enc)
        return self.head(self.dec_norm(y))


class Clocks:
    """Host time of the global module hooks (wrapped before watch_modules() installs them), and the work the pack
    and unpack hooks start (the transport's calls, recomputation: on a GPU, what the host only queues)."""

    TRANSPORT = ("to_host", "to_device", "to_device_into", "compute_wait", "done", "give_back", "mark")

    def __init__(self, mover):
        self.module_s, self.module_calls, self.work_s = 0.0, 0, 0.0
        self._inside = self._depth = 0  # in a pack or unpack hook; in work (work in work counts once)
        m = mover._modules
        m._pre, m._post = self._module(m._pre), self._module(m._post)
        mover.pack, mover.unpack = self._hook(mover.pack), self._hook(mover.unpack)
        mover._remake = self._work(mover._remake)
        make = mover._make_transport

        def transport(dev):
            tr = make(dev)
            for name in self.TRANSPORT:
                setattr(tr, name, self._work(getattr(tr, name)))
            return tr
        mover._make_transport = transport

    def read(self):
        return self.module_s, self.module_calls, self.work_s

    def _module(self, fn):
        def hook(*args):
            t0 = time.perf_counter()
            try:
                return fn(*args)
            finally:
                self.module_s += time.perf_counter() - t0
                self.module_calls += 1
        return hook

    def _hook(self, fn):
        def hook(x):
            self._inside += 1
            try:
                return fn(x)
            finally:
                self._inside -= 1
        return hook

    def _work(self, fn):
        def work(*args):
            if not self._inside or self._depth:
                return fn(*args)
            self._depth += 1
            t0 = time.perf_counter()
            try:
                return fn(*args)
            finally:
                self.work_s += time.perf_counter() - t0
                self._depth -= 1
        return work


def train(a, mover=None, profile_from=None):
    """Per iteration: (loss, wall seconds, mover counters or None, (module hook seconds, module hook calls, seconds of
    work in the pack and unpack hooks))."""
    torch.manual_seed(0)
    model = T5ish(a.d, a.layers)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    g = torch.Generator().manual_seed(7)
    data = [(torch.randint(0, 128, (a.batch, a.seq), generator=g), torch.randint(0, 128, (a.batch, a.seq), generator=g))
            for _ in range(a.iterations)]
    clock = Clocks(mover) if mover else None
    hooks = mover.watch_modules() if mover else []
    prof = cProfile.Profile() if profile_from else None
    out = []
    try:
        for it, (src, tgt) in enumerate(data):
            if prof and it + 1 == profile_from:
                prof.enable()
            if a.gc == "off":
                gc.collect()  # (automatic collections are off: one inside a hook counted as its time)
            before = clock.read() if clock else (0.0, 0, 0.0)
            t0 = time.perf_counter()
            opt.zero_grad(set_to_none=True)
            ctx = torch.autograd.graph.saved_tensors_hooks(mover.pack, mover.unpack) if mover else None
            if ctx:
                ctx.__enter__()
            try:
                loss = nn.functional.cross_entropy(model(src, tgt).reshape(-1, 128), tgt.reshape(-1))
            finally:
                if ctx:
                    ctx.__exit__(None, None, None)
            loss.backward()
            if mover:
                mover.optimizer_begins(opt)
            opt.step()
            if mover:
                mover.iteration_end(opt)
            wall = time.perf_counter() - t0
            mod = tuple(b - a for a, b in zip(before, clock.read())) if clock else (0.0, 0, 0.0)
            out.append((loss.item(), wall, mover.history[-1] if mover else None, mod))
    finally:
        for h in hooks:
            h.remove()
    if prof:
        prof.disable()
        pstats.Stats(prof).sort_stats(a.profile_sort).print_stats(a.profile_only, a.profile)
    return out


BALLAST = []  # --ballast: long-lived objects, as a larger program holds


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--iterations", type=int, default=16)
    ap.add_argument("--layers", type=int, default=6, help="encoder layers, and as many decoder layers")
    ap.add_argument("--d", type=int, default=64, help="model width")
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--seq", type=int, default=32)
    ap.add_argument("--budget", type=float, default=0.6, help="of the recorded iteration's live peak")
    ap.add_argument("--min-kib", type=int, default=16, help="storages under this never move (min_bytes)")
    ap.add_argument("--profile", type=int, default=0, help="cProfile the planned iterations: print this many rows")
    ap.add_argument("--profile-sort", default="tottime", choices=("tottime", "cumulative", "ncalls"),
                    help="the profile's order: own time, time with callees, or calls")
    ap.add_argument("--profile-only", default="", help="print only the functions whose file or name match this "
                    "regular expression (e.g. tierpack)")
    ap.add_argument("--gc", choices=("off", "on", "freeze"), default="off",
                    help="Python's automatic collection: off (collected between iterations), on (as a program runs), "
                         "freeze (on, and the mover freezes what is alive at its first plan: Note [Python's collector])")
    ap.add_argument("--ballast", type=int, default=0, help="this many more long-lived objects (a larger program's)")
    a = ap.parse_args()
    torch.set_num_threads(1)
    BALLAST.extend([i] for i in range(a.ballast))  # held: objects a full collection scans
    if a.gc == "off":
        gc.disable()
    if not os.path.exists(LIB):
        sys.exit("hook_cost: %s not built (TIERPACK_CUDA_LIB)" % LIB)

    base = train(a)
    mover, _ = make_mover(None, budget_fraction=a.budget, min_bytes=a.min_kib << 10, poked=False,
                          gc_freeze=a.gc == "freeze")
    first_planned = mover.record_iteration + mover.timed_iterations + 1  # Note [Recording]
    runs = train(a, mover, profile_from=first_planned if a.profile else None)
    plan = mover.plan_summary or {}
    print("T5-style: %d + %d layers, d %d, batch %d x %d; budget %.0f%% of the recorded peak; plan: %s moves "
          "(%s B out, %s B made again)" % (a.layers, a.layers, a.d, a.batch, a.seq, 100 * a.budget, plan.get("moves"),
                                           plan.get("bytes_out"), plan.get("bytes_recomputed")))
    print("losses equal to the run without hooks: %s" % ([r[0] for r in base] == [r[0] for r in runs]))
    print("%-9s %5s %6s %8s %8s %8s %9s %8s %12s %8s %8s" % (
        "phase", "iters", "calls", "host_ms", "us/call", "own_us", "mod_hooks", "us/hook", "hooks_ms/it", "wall_ms",
        "base_ms"))
    phases = []
    for i, (_, wall, h, mod) in enumerate(runs):
        mode = h["mode"] if i + 1 != mover.record_iteration else "recorded"
        if mover.record_iteration < i + 1 < first_planned:
            mode = "timed"
        if not phases or phases[-1][0] != mode:
            phases.append((mode, []))
        phases[-1][1].append(i)
    for mode, its in phases:
        hs = [runs[i][2] for i in its]
        calls, host = sum(h["calls"] for h in hs), sum(h["host_ms"] for h in hs)
        mod_s, mod_n, work_s = (sum(runs[i][3][k] for i in its) for k in range(3))
        n = len(its)
        print("%-9s %5d %6d %8.2f %8.1f %8.1f %9d %8.1f %12.2f %8.2f %8.2f" % (
            mode, n, calls // n, host / n, 1e3 * host / max(calls, 1), 1e3 * (host - 1e3 * work_s) / max(calls, 1),
            mod_n // n, 1e6 * mod_s / max(mod_n, 1), (host + 1e3 * mod_s) / n,
            1e3 * statistics.median(runs[i][1] for i in its), 1e3 * statistics.median(base[i][1] for i in its)))
    planned = [r[2] for r in runs if r[2]["mode"] == "planned"]
    if planned:
        print("Python's collector in planned iterations (--gc %s%s): %.1f ms, %d full collection(s), most in one "
              "iteration %.1f ms; the hooks' host time per iteration: median %.1f ms, most %.1f ms" % (
                  a.gc, ": the bench's collections between iterations" if a.gc == "off" else "",
                  sum(h["gc_ms"] for h in planned), sum(h["gc_full"] for h in planned),
                  max(h["gc_ms"] for h in planned),
                  statistics.median(h["host_ms"] for h in planned), max(h["host_ms"] for h in planned)))
    last = runs[-1][2]
    print("last planned iteration: %d bytes out, %d made again (%d storages), %d late, %d divergences" % (
        last["bytes_out"], last["bytes_recomputed"], last["recomputed"], last["fetched_late"], last["divergences"]))


if __name__ == "__main__":
    main()
