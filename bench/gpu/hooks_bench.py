#!/usr/bin/env python3
"""What the activation hooks (python/tierpack/activations.py) cost and save, on PyTorch's own allocator.

GPT-2 large as in gpt2_bench.py (batch 8, T 1024, bf16 autocast, AdamW), one process, PyTorch's caching
allocator (no tierpack runtime: the hooks alone). Configurations, run one after the other:
  plain            no hooks
  passthrough      saved-tensor hooks that return what they get (the price of autograd calling Python)
  copy-all-keep    every saved tensor chosen and copied out, none let go (copies out, nothing back)
  limit -N GiB     the offloader holding live bytes N GiB under the plain run's live peak
  ..., no pool     the same with a pinned buffer from PyTorch's pinned allocator for every copy out
                   (CudaTransport(pool=False)) instead of tierpack's per-size pool
Per configuration: median step time over --steps after --warmup (the offloader records the second warm-up
step, the first with optimizer state, and plans from it), PyTorch's max_memory_allocated (live peak) over the timed steps, and the
offloader's bytes out / let go / back per step, late copies, and waits. Losses are compared to plain.

With --probe, each limit configuration also says, per kind of saved tensor, how many bytes the hooks let
go and how many of them the allocator got back at that moment (a storage something else still holds frees
nothing): "param-cast" (bf16 with a parameter's shape: autocast's cached weight casts), "view" (part of a
larger storage), "own" (the rest). Per configuration it also prints PyTorch's reserved peak and the
allocator's cudaMalloc / cudaFree / cache-flush counts per timed step.

Usage: python3 bench/gpu/hooks_bench.py [--steps 10] [--warmup 3] [--limits 4,8,12] [--probe] [--json out.json]
"""
import argparse
import json
import os
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "python"))
sys.path.insert(0, HERE)
GiB = float(1 << 30)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--layers", type=int, default=36)
    ap.add_argument("--limits", default="4,8,12")
    ap.add_argument("--probe", action="store_true")
    ap.add_argument("--json")
    a = ap.parse_args()

    import torch
    import torch.nn.functional as F
    from gpt2_bench import build_model
    from tierpack.activations import ActivationOffloader, _Saved
    from tierpack.copy_streams import CudaTransport

    torch.manual_seed(0)
    torch.backends.cuda.matmul.allow_tf32 = True
    dev = torch.device("cuda")
    with dev:
        model = build_model(torch, a.layers, 1280, 20, 50257, 1024, ckpt=False)
    init = {k: v.clone() for k, v in model.state_dict().items()}
    g = torch.Generator(device="cuda").manual_seed(1234)
    batches = [torch.randint(0, 50257, (8, 1025), device=dev, generator=g) for _ in range(4)]

    def run(name, hooks=None, off=None):
        model.load_state_dict(init)
        opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
        losses, times, peak = [], [], 0
        keys = ("num_device_alloc", "num_device_free", "num_sync_all_streams", "num_alloc_retries")
        for i in range(a.warmup + a.steps):
            if i == a.warmup:
                torch.cuda.synchronize()
                s0 = torch.cuda.memory_stats()
            torch.cuda.reset_peak_memory_stats()  # per iteration: the offloader reads each iteration's peak
            t0 = time.perf_counter()
            x = batches[i % 4]
            opt.zero_grad(set_to_none=True)
            ctx = torch.autograd.graph.saved_tensors_hooks(*hooks) if hooks else None
            if ctx:
                ctx.__enter__()
            with torch.autocast("cuda", dtype=torch.bfloat16):
                logits = model(x[:, :-1])
                loss = F.cross_entropy(logits.float().view(-1, logits.shape[-1]), x[:, 1:].reshape(-1))
            if ctx:
                ctx.__exit__(None, None, None)
            del logits
            loss.backward()
            opt.step()
            losses.append(loss.item())
            if off:
                off.iteration_end(opt)
            if i >= a.warmup:
                times.append(time.perf_counter() - t0)
                peak = max(peak, torch.cuda.max_memory_allocated())
        torch.cuda.synchronize()
        s1 = torch.cuda.memory_stats()
        del opt
        r = {"config": name, "step_ms": statistics.median(times) * 1e3, "peak_allocated": peak,
             "peak_reserved": torch.cuda.max_memory_reserved(), "losses": losses,
             "allocator_per_step": {k: (s1.get(k, 0) - s0.get(k, 0)) / a.steps for k in keys}}
        if off and getattr(off, "probe", None):
            r["released_by_kind"] = {k: {"let_go_GB": v[0] / 1e9 / max(len(off.history), 1),
                                         "freed_GB": v[1] / 1e9 / max(len(off.history), 1)}
                                     for k, v in off.probe.items()}
        if off:
            hist = off.history[-a.steps:]
            r["plan"] = off.plan_summary
            r["per_step"] = {k: sum(c[k] for c in hist) / max(len(hist), 1) for k in (hist[0] if hist else {})}
        torch.cuda.empty_cache()
        return r

    param_shapes = {tuple(p.shape) for p in model.parameters()}

    def kind(t):
        if t.dtype == torch.bfloat16 and tuple(t.shape) in param_shapes:
            return "param-cast"
        return "view" if t.untyped_storage().nbytes() > t.numel() * t.element_size() else "own"

    def offloader(limit, pool=True):
        live = lambda d: torch.cuda.memory_allocated(d)  # noqa: E731
        off = ActivationOffloader(torch, lambda d: CudaTransport(torch, d, pool=pool),
                                  live_bytes=live, peak_bytes=lambda d: torch.cuda.max_memory_allocated(d),
                                  limit_bytes=limit, record_iteration=2, log=lambda m: print("  " + m, flush=True))
        if a.probe:
            kinds, released = {}, {}  # _Saved index -> kind; kind -> [let go, freed] bytes
            pack = off.pack

            def probing_pack(t):
                k = kind(t)
                out = pack(t)
                if isinstance(out, _Saved):
                    kinds[out.index] = k
                return out

            def on_release(h, freed):
                r = released.setdefault(kinds.get(h.index, "?"), [0, 0])
                r[0] += h.nbytes
                r[1] += max(freed, 0)

            off.pack, off.on_release, off.probe = probing_pack, on_release, released
        return off

    results = [run("plain")]
    peak = results[0]["peak_allocated"]
    print(json.dumps({k: v for k, v in results[0].items() if k != "losses"}), flush=True)
    configs = [("passthrough", (lambda t: t, lambda t: t), None)]
    configs += [("copy-all-keep", None, ("keep", True)), ("copy-all-keep, no pool", None, ("keep", False))]
    for n in [float(x) for x in a.limits.split(",") if x]:
        configs.append((f"limit -{n:g} GiB", None, (peak - n * GiB, True)))
    configs.append((f"limit -{n:g} GiB, no pool", None, (peak - n * GiB, False)))
    for name, hooks, how in configs:
        off = None
        if how and how[0] == "keep":
            off = offloader(lambda d: 1, pool=how[1])  # everything chosen ...
            off._relieve = lambda i: None  # ... and nothing ever let go
        elif how is not None:
            off = offloader(lambda d, lim=how[0]: lim, pool=how[1])
        if off:
            off.note_parameters(model.parameters())
            hooks = (off.pack, off.unpack)
        torch.cuda.reset_peak_memory_stats()
        r = run(name, hooks, off)
        r["loss_max_rel_diff"] = max(abs(x - y) / abs(y) for x, y in zip(r["losses"], results[0]["losses"]))
        results.append(r)
        print(json.dumps({k: v for k, v in r.items() if k != "losses"}), flush=True)

    print("| config | step ms | vs plain | live peak GiB | out GB/step | let go GB/step | freed GB/step | back GB/step | late/step | waits/step | loss rel.diff |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    base = results[0]["step_ms"]
    for r in results:
        c = r.get("per_step", {})
        f = lambda k, s=1e9: f"{c[k] / s:.2f}" if k in c else "-"  # noqa: E731
        print(f"| {r['config']} | {r['step_ms']:.0f} | {r['step_ms'] / base:.2f} | {r['peak_allocated'] / GiB:.2f} | "
              f"{f('to_host_bytes')} | {f('released_bytes')} | {f('freed_bytes')} | {f('to_device_bytes')} | {f('fetched_late', 1)} | "
              f"{f('stalls', 1)} | {r.get('loss_max_rel_diff', 0):.1e} |")
    for r in results:
        for k, v in r.get("released_by_kind", {}).items():
            print(f"  {r['config']}: {k}: let go {v['let_go_GB']:.2f} GB/step, freed {v['freed_GB']:.2f}")
    for r in results:  # cudaMalloc / cudaFree / synchronizing cache flushes of PyTorch's allocator per step
        print(f"  {r['config']}: reserved peak {r['peak_reserved'] / GiB:.2f} GiB, allocator per step {r['allocator_per_step']}")
    if a.json:
        with open(a.json, "w") as fh:
            json.dump({"results": results, "argv": sys.argv, "torch": torch.__version__,
                       "gpu": torch.cuda.get_device_name()}, fh, indent=1)


if __name__ == "__main__":
    main()
