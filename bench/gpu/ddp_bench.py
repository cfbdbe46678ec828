#!/usr/bin/env python3
"""GPT-2 large under DistributedDataParallel (NCCL, one GPU per rank), default PyTorch vs tierpack at
per-rank GPU budgets, one table. The multi-GPU counterpart of gpt2_bench.py (same model, batch, bf16
autocast, AdamW, NVML peak sampling, floor), its model and sampler imported from there.

Each mode is one torchrun job of --ranks processes; rank r sees only GPU r (CUDA_VISIBLE_DEVICES is set
per rank before CUDA starts, so NVML samples that GPU), ranks train on different random tokens, DDP
averages the gradients. Step time: the slowest rank's median over --steps steps after warm-up (the
job runs at the slowest rank's pace). Peak: the highest rank's NVML peak over the timed steps minus its
baseline. Floor per rank: max(default step, (default peak - budget) / pinned bandwidth), with the
bandwidth measured by the default job's rank 0 (both ranks copy at once, each over its own link).

Usage: python3 bench/gpu/ddp_bench.py [--ranks 2] [--budgets 60,45] [--steps 20] [--warmup 3]
         [--tierpack-warmup 6] [--lib build/lib/libtierpack_cuda.so] [--gpu-opts ...] [--json out.json]
         [--logs DIR] [--share-gpu]   (a one-GPU machine: every rank on GPU 0, gloo instead of NCCL)
"""
import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))
GiB = float(1 << 30)


def run_rank(a):
    local = int(os.environ.get("LOCAL_RANK", "0"))
    # Before CUDA exists in this process: one GPU per rank, or all ranks on GPU 0 (--share-gpu).
    os.environ["CUDA_VISIBLE_DEVICES"] = "0" if a.share_gpu else str(local)
    sys.path.insert(0, HERE)
    import gpt2_bench as gb
    sampler = gb.NvmlSampler()
    tc = None
    if a.child == "tierpack":
        sys.path.insert(0, os.path.join(ROOT, "python"))
        import tierpack.cuda as tc
        tc.install(budget=int(a.alloc_budget), gpu="mechanism:vmm" + ("," + a.gpu_opts if a.gpu_opts else ""), path=a.lib)
    import torch
    import torch.distributed as dist
    import torch.nn.functional as F
    from torch.nn.parallel import DistributedDataParallel

    dist.init_process_group("gloo" if a.share_gpu else "nccl")  # NCCL refuses two ranks on one GPU
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.cuda.set_device(0)
    torch.manual_seed(0)  # same initial parameters on every rank
    torch.backends.cuda.matmul.allow_tf32 = True
    dev = torch.device("cuda")
    with dev:
        model = gb.build_model(torch, a.layers, 1280, 20, 50257, a.seq, ckpt=False)
    model = DistributedDataParallel(model, device_ids=[0])
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    g = torch.Generator(device="cuda").manual_seed(1234 + rank)
    batches = [torch.randint(0, 50257, (a.batch, a.seq + 1), device=dev, generator=g) for _ in range(4)]

    def step(i):
        x = batches[i % len(batches)]
        opt.zero_grad(set_to_none=True)
        with torch.autocast("cuda", dtype=torch.bfloat16):
            logits = model(x[:, :-1])
            loss = F.cross_entropy(logits.float().view(-1, logits.shape[-1]), x[:, 1:].reshape(-1))
        del logits
        loss.backward()
        opt.step()
        return loss.item()

    losses, times = [], []
    for i in range(a.warmup):
        losses.append(step(i))
    torch.cuda.synchronize()
    dist.barrier()
    sampler.reset()
    for i in range(a.steps):
        t0 = time.perf_counter()
        losses.append(step(a.warmup + i))
        times.append(time.perf_counter() - t0)
    torch.cuda.synchronize()
    # Sharing one GPU, NVML sees every rank's memory at once: count an equal share per rank.
    peak = sampler.peak_bytes() / (world if a.share_gpu else 1)
    res = {"rank": rank, "world": world, "mode": a.child, "median_step_s": statistics.median(times),
           "peak_bytes": peak, "losses": losses}
    if tc is not None:
        st = tc.stats()
        its = [r for r in st.get("iterations", []) if r["iteration"] > a.warmup]
        n = max(len(its), 1)
        res["tierpack"] = {
            "phase": st.get("phase"), "divergence": st.get("divergence"),
            "to_host_bytes_per_step": sum(r["bytes_to_host"] for r in its) / n,
            "to_device_bytes_per_step": sum(r["bytes_to_device"] for r in its) / n,
            "stalls_per_step": sum(r["stalls"] for r in its) / n,
            "failures": sum(r["failures"] for r in its),
            # streams held at remap gates: those that allocated and those record_stream named (NCCL's)
            "gated_streams": st.get("allocator", {}).get("streams"),
            "gates_per_step": sum(r["gates"] for r in its) / n,
            "gate_timeouts": sum(r["gate_timeouts"] for r in its),
        }
    if a.child == "default" and rank == 0:
        res["pinned_h2d_Bps"], res["pinned_d2h_Bps"] = gb.pinned_bandwidth(torch, dev)
    sampler.stop = True
    print("RESULT " + json.dumps(res), flush=True)
    dist.destroy_process_group()


def job(a, mode, budget=None, alloc_budget=None, warmup=None):
    port = 29500 + int(time.time()) % 1000
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", str(a.ranks), "--master_port", str(port),
           os.path.abspath(__file__), "--child", mode, "--steps", str(a.steps),
           "--warmup", str(warmup if warmup is not None else a.warmup), "--layers", str(a.layers),
           "--batch", str(a.batch), "--seq", str(a.seq), "--lib", a.lib] + (["--share-gpu"] if a.share_gpu else [])
    if alloc_budget is not None:
        cmd += ["--alloc-budget", str(int(alloc_budget))]
    if a.gpu_opts:
        cmd += ["--gpu-opts", a.gpu_opts]
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    tag = mode + (f"_{budget / GiB:.1f}G" if budget else "")
    if a.logs and mode == "tierpack":  # each rank rewrites its GPU statistics every iteration
        env["TIERPACK_CONF"] = "stats_out:" + os.path.join(os.path.abspath(a.logs), tag + ".stats.%r.json")
    t0 = time.time()
    # Own process group: a timed-out job's ranks are killed with torchrun, not left holding the GPUs.
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, start_new_session=True)
    try:
        out, err = p.communicate(timeout=a.child_timeout)
        timed_out = False
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        out, err = p.communicate()
        timed_out = True
    if a.logs:
        with open(os.path.join(a.logs, tag + ".stderr.txt"), "w") as f:
            f.write(err)
    if timed_out:
        return {"mode": mode, "budget": budget, "error": f"timed out after {a.child_timeout} s", "stderr": err[-4000:]}
    ranks = [json.loads(l[7:]) for l in out.splitlines() if l.startswith("RESULT ")]
    if len(ranks) != a.ranks:
        return {"mode": mode, "budget": budget, "error": f"exit {p.returncode}, {len(ranks)} rank results",
                "stderr": err[-4000:]}
    ranks.sort(key=lambda r: r["rank"])
    return {"mode": mode, "budget": budget, "ranks": ranks, "wall_s": time.time() - t0,
            "median_step_s": max(r["median_step_s"] for r in ranks), "peak_bytes": max(r["peak_bytes"] for r in ranks)}


def render(results, base, a):
    step0, peak = base["median_step_s"], base["peak_bytes"]
    r0 = base["ranks"][0]
    # The floor divides by it: a default run without the measurement fails here, never a constant (issue 26).
    missing = [k for k in ("pinned_h2d_Bps", "pinned_d2h_Bps") if not r0.get(k)]
    if missing:
        raise SystemExit(f"ddp_bench: rank 0 of the default run has no pinned bandwidth measurement ({', '.join(missing)})")
    bw = min(r0["pinned_h2d_Bps"], r0["pinned_d2h_Bps"])
    hdr = ("mode", "budget/rank", "step ms", "tokens/s (all ranks)", "peak GiB (max rank)", "to host GB/step/rank",
           "to dev GB/step/rank", "floor ms", "floor/step", "loss rel.diff (rank 0)", "note")
    rows = []
    for r in results:
        if "error" in r:
            rows.append((r["mode"] + (f" {r['pct']:.0f}%" if r.get("pct") else ""), "", "-", "-", "-", "-", "-", "-", "-", "-",
                         r["error"]))
            continue
        step = r["median_step_s"]
        floor = max(step0, max(peak - r["budget"], 0) / bw) if r.get("budget") else step0
        tps = [x.get("tierpack") for x in r["ranks"] if x.get("tierpack")]
        l0, l = base["ranks"][0]["losses"], r["ranks"][0]["losses"]
        n = min(len(l0), len(l))
        diff = max(abs(l[i] - l0[i]) / abs(l0[i]) for i in range(n)) if n else float("nan")
        note = f"losses compared at steps 0-{n - 1} of {len(l)}; " if n < len(l) else ""
        if tps:
            note += "phases " + ",".join(str(t.get("phase")) for t in tps)
            if any(t.get("failures") for t in tps):
                note += f", {sum(t['failures'] for t in tps)} failed moves"
            if all(t.get("gated_streams") is not None for t in tps):
                note += ", gated streams " + ",".join(str(t["gated_streams"]) for t in tps)
                note += f", gates/step {max(t['gates_per_step'] for t in tps):.0f}"
                note += f", gate timeouts {sum(t['gate_timeouts'] for t in tps)}"
        rows.append((r["mode"] + (f" {r['pct']:.0f}%" if r.get("pct") else ""),
                     f"{r['budget'] / GiB:.1f} GiB" if r.get("budget") else "-", f"{step * 1e3:.0f}",
                     f"{a.ranks * a.batch * a.seq / step:.0f}", f"{r['peak_bytes'] / GiB:.1f}",
                     f"{max(t['to_host_bytes_per_step'] for t in tps) / 1e9:.2f}" if tps else "-",
                     f"{max(t['to_device_bytes_per_step'] for t in tps) / 1e9:.2f}" if tps else "-",
                     f"{floor * 1e3:.0f}", f"{floor / step:.2f}", f"{diff:.1e}", note))
    widths = [max(len(str(x[i])) for x in rows + [hdr]) for i in range(len(hdr))]
    line = lambda row: "| " + " | ".join(str(c).ljust(w) for c, w in zip(row, widths)) + " |"  # noqa: E731
    out = [line(hdr), "|" + "|".join("-" * (w + 2) for w in widths) + "|"] + [line(x) for x in rows]
    out.append(f"{a.ranks} ranks{' sharing GPU 0 (gloo; NVML peak / ranks)' if a.share_gpu else ''}; default peak per rank {peak / GiB:.2f} GiB (NVML, max over ranks); pinned bandwidth "
               f"{bw / 1e9:.1f} GB/s (rank 0, slower direction); floor = max(default step, (peak - budget) / bandwidth)")
    out.append(f"warm-up steps before the timed ones: tierpack {a.tierpack_warmup} (its warm-up, observed and planned"
               f" iterations), the default run {a.warmup}; loss rel.diff: rank 0's step i against the default run's step i,"
               f" over the steps both made")
    return "\n".join(out)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sys.path.insert(0, HERE)
    from gpt2_bench import add_run_args  # (gpt2_bench imports torch only in its functions)
    add_run_args(ap)
    ap.add_argument("--ranks", type=int, default=2)
    ap.add_argument("--budgets", default="60,45")
    ap.add_argument("--share-gpu", action="store_true",
                    help="all ranks on GPU 0 with the gloo backend (a one-GPU machine); peaks are the GPU's / ranks")
    ap.add_argument("--context-bytes", type=float, default=1.0 * GiB,
                    help="device memory outside the allocator per rank (CUDA context, NCCL buffers)")
    ap.add_argument("--lib", default=os.path.join(ROOT, "build", "lib", "libtierpack_cuda.so"))
    ap.add_argument("--gpu-opts", default="")
    ap.add_argument("--child-timeout", type=int, default=240)
    ap.add_argument("--json")
    ap.add_argument("--logs", help="folder for each job's stderr and each tierpack rank's GPU statistics file")
    a = ap.parse_args()
    if a.logs:
        os.makedirs(a.logs, exist_ok=True)
    if a.child:
        return run_rank(a)
    base = job(a, "default")
    print(json.dumps({k: v for k, v in base.items() if k != "ranks"}), flush=True)
    if "error" in base:
        print(base.get("stderr", ""), file=sys.stderr)
        sys.exit(1)
    results = [base]
    for pct in [float(x) for x in a.budgets.split(",") if x]:
        budget = base["peak_bytes"] * pct / 100.0
        r = job(a, "tierpack", budget=budget, alloc_budget=max(budget - a.context_bytes, 1 << 30), warmup=a.tierpack_warmup)
        r["pct"] = pct
        results.append(r)
        print(json.dumps({k: v for k, v in r.items() if k not in ("ranks",)})[:2000], flush=True)
    table = render(results, base, a)
    print(table)
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"results": results, "table": table, "argv": sys.argv}, f, indent=1)


if __name__ == "__main__":
    main()
