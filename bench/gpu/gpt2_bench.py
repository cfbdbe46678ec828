#!/usr/bin/env python3
"""GPT-2 large training under GPU memory budgets, one table.

Modes, each in a fresh process (the CUDA allocator is chosen before the first CUDA allocation):
  default       plain PyTorch
  ckpt          gradient checkpointing of every transformer block (torch.utils.checkpoint)
  save_on_cpu   torch.autograd.graph.save_on_cpu(pin_memory=True)
  tierpack      tierpack's GPU tier with the vmm mechanism (page groups remapped behind gates; python/tierpack/
                cuda.py) at budgets of the default run's peak. The storage mechanism (the default since GPU
                tier v2) has its own bench over four models: bench/gpu/models_bench.py

Model: GPT-2 large written in plain torch (36 layers, d=1280, 20 heads, vocab 50257, T=1024), batch 8,
bf16 autocast, AdamW, random init and random tokens (fixed seeds, no dropout: every mode computes the
same losses). Step time: median over --steps steps after --warmup steps. Peak device memory: NVML
"used" sampled every millisecond over the timed steps, minus the process's baseline, identically for
every mode (not the allocator's own counter). Bytes moved per step: tierpack's counters (its modes
only). Physical floor: max(default step, (default peak - budget) / pinned bandwidth per direction),
with the pinned bandwidth measured in the default run. Transfer bound: the least step any runtime that
only places tensors (GPU or host memory) can take at that budget, from the default run's live bytes and GPU times at
each block boundary of forward and backward (transfer_bound.py, Note [Transfer bound]); floor/bound is the
best floor/step such a runtime can reach. Each mode's forward, backward and optimizer GPU times follow the table.

Usage: python3 bench/gpu/gpt2_bench.py [--steps 20] [--warmup 3] [--tierpack-warmup 6]
         [--budgets 100,75,60,45,35] [--modes default,ckpt,save_on_cpu,tierpack] [--layers 36]
         [--lib build/lib/libtierpack_cuda.so] [--gpu-opts chunk:32M] [--json out.json]
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import threading
import time

from transfer_bound import transfer_bound

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))
GiB = float(1 << 30)


# ---------------------------------------------------------------------------------------------- model
def build_model(torch, layers, d, heads, vocab, seq, ckpt):
    import torch.nn as nn
    import torch.nn.functional as F
    from torch.utils.checkpoint import checkpoint

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
            self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
            self.fc, self.fc2 = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)

        def forward(self, x):
            B, T, C = x.shape
            q, k, v = self.qkv(self.ln1(x)).split(C, dim=2)
            q, k, v = (t.view(B, T, heads, C // heads).transpose(1, 2) for t in (q, k, v))
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            x = x + self.proj(y.transpose(1, 2).contiguous().view(B, T, C))
            return x + self.fc2(F.gelu(self.fc(self.ln2(x)), approximate="tanh"))

    class GPT(nn.Module):
        def __init__(self):
            super().__init__()
            self.wte, self.wpe = nn.Embedding(vocab, d), nn.Embedding(seq, d)
            self.blocks = nn.ModuleList(Block() for _ in range(layers))
            self.ln_f = nn.LayerNorm(d)
            self.head = nn.Linear(d, vocab, bias=False)
            self.head.weight = self.wte.weight
            for m in self.modules():
                if isinstance(m, (nn.Linear, nn.Embedding)):
                    nn.init.normal_(m.weight, std=0.02)
                if isinstance(m, nn.Linear) and m.bias is not None:
                    nn.init.zeros_(m.bias)

        def forward(self, idx):
            pos = torch.arange(idx.shape[1], device=idx.device)
            x = self.wte(idx) + self.wpe(pos)
            for b in self.blocks:
                x = checkpoint(b, x, use_reentrant=False) if ckpt else b(x)
            return self.head(self.ln_f(x))

    return GPT()


# ------------------------------------------------------------------------------------- memory sampler
class NvmlSampler:
    """Device memory in use (NVML), sampled every millisecond; the peak since reset().

    A sample taken before a reset never counts after it: the sampling thread read the peak, asked NVML
    (which takes a while) and wrote the maximum back, so a reset during that call was undone and the warm-up's
    peak came back as the timed steps' (bench/results/gpu-h200-2026-12-01-2, calls 4-5: T5 39.7 GiB with
    its allocator holding 30.1 GiB)."""

    def __init__(self, used=None):
        if used is None:
            import pynvml
            pynvml.nvmlInit()
            h = pynvml.nvmlDeviceGetHandleByIndex(int(os.environ.get("CUDA_VISIBLE_DEVICES", "0").split(",")[0] or 0))
            used = lambda: pynvml.nvmlDeviceGetMemoryInfo(h).used  # noqa: E731
        self.used = used
        self._m = threading.Lock()
        self._generation = 0
        self.base = self.used()
        self.peak = 0
        self.stop = False
        self.t = threading.Thread(target=self.run, daemon=True)
        self.t.start()

    def run(self):
        while not self.stop:
            with self._m:
                gen = self._generation
            u = self.used()
            with self._m:
                if gen == self._generation:
                    self.peak = max(self.peak, u)
            time.sleep(0.001)

    def reset(self):
        with self._m:
            self._generation += 1
            self.peak = self.used()

    def peak_bytes(self):
        return max(self.peak - self.base, 0)


# ----------------------------------------------------------------------------------------- one mode
def run_child(a):
    sampler = NvmlSampler()  # before CUDA exists in this process: its baseline excludes us
    tc = None
    if a.mode == "tierpack":
        sys.path.insert(0, os.path.join(ROOT, "python"))
        import tierpack.cuda as tc
        opts = "mechanism:vmm" + ("," + a.gpu_opts if a.gpu_opts else "")
        tc.install(budget=int(a.alloc_budget), gpu=opts or None, path=a.lib)
    if a.deterministic:
        os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
    import torch
    import torch.nn.functional as F

    if a.deterministic:
        # Bitwise-repeatable kernels. warn_only=False: flash attention's backward only takes its
        # deterministic algorithm then (with warn_only it warns and stays non-deterministic), and an op
        # without one raises instead of silently varying. cuDNN attention has none: left out.
        torch.use_deterministic_algorithms(True, warn_only=False)
        torch.backends.cuda.enable_cudnn_sdp(False)
    torch.manual_seed(0)
    torch.backends.cuda.matmul.allow_tf32 = True
    dev = torch.device("cuda")
    t_init = time.perf_counter()
    with dev:
        model = build_model(torch, a.layers, 1280, 20, 50257, a.seq, ckpt=a.mode == "ckpt")
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    g = torch.Generator(device="cuda").manual_seed(1234)
    batches = [torch.randint(0, 50257, (a.batch, a.seq + 1), device=dev, generator=g) for _ in range(4)]
    init_s = time.perf_counter() - t_init

    # Marks: a CUDA event at named points of every step (Note [Transfer bound] in transfer_bound.py). In the default
    # mode also after each block's forward and when its output's gradient is ready; in its probe steps (after the
    # timed ones) each mark also reads and resets PyTorch's peak of requested bytes since the previous mark.
    marks, probing = [], [False]
    step_marks = []  # per step: [(name, event, peak bytes or None)]

    def mark(name):
        ev = torch.cuda.Event(enable_timing=True)
        ev.record()
        peak = None
        if probing[0]:
            peak = torch.cuda.memory_stats()["requested_bytes.all.peak"]
            torch.cuda.reset_peak_memory_stats()
        marks.append((name, ev, peak))

    if a.mode == "default":
        def after(name):
            def hook(module, inputs, out):
                mark("forward " + name)
                if out.requires_grad:
                    out.register_hook(lambda grad: mark("backward " + name))
            return hook
        for k, blk in enumerate(model.blocks):
            blk.register_forward_hook(after(f"block {k}"))
        model.head.register_forward_hook(after("head"))

    def step(i, probe=False):
        x = batches[i % len(batches)]
        inp, tgt = x[:, :-1], x[:, 1:]
        opt.zero_grad(set_to_none=True)
        marks.clear()
        probing[0] = probe
        if probe:
            torch.cuda.reset_peak_memory_stats()
        mark("start")
        with torch.autocast("cuda", dtype=torch.bfloat16):
            if a.mode == "save_on_cpu":
                with torch.autograd.graph.save_on_cpu(pin_memory=True):
                    logits = model(inp)
                    loss = F.cross_entropy(logits.float().view(-1, logits.shape[-1]), tgt.reshape(-1))
            else:
                logits = model(inp)
                loss = F.cross_entropy(logits.float().view(-1, logits.shape[-1]), tgt.reshape(-1))
        del logits
        mark("loss")
        loss.backward()
        mark("backward end")
        opt.step()
        mark("optimizer end")
        probing[0] = False
        value = loss.item()
        step_marks.append(list(marks))
        return value

    warmup = a.warmup
    losses, warm_times, times = [], [], []
    for i in range(warmup):
        t0 = time.perf_counter()
        losses.append(step(i))
        warm_times.append(time.perf_counter() - t0)
    torch.cuda.synchronize()
    sampler.reset()
    for i in range(a.steps):
        t0 = time.perf_counter()
        losses.append(step(warmup + i))
        times.append(time.perf_counter() - t0)
    torch.cuda.synchronize()
    peak = sampler.peak_bytes()
    med = statistics.median(times)
    timed = [{name: m[0][1].elapsed_time(ev) / 1e3 for name, ev, _ in m} for m in step_marks[warmup:]]
    at = lambda name: statistics.median(t[name] for t in timed)
    res = {
        "mode": a.mode, "budget": a.budget, "alloc_budget": a.alloc_budget, "layers": a.layers,
        "median_step_s": med, "tokens_per_s": a.batch * a.seq / med, "peak_bytes": peak,
        "losses": losses, "warmup_step_s": warm_times, "step_s": times, "init_s": init_s,
        "phase_s": {"forward": at("loss"), "backward": at("backward end") - at("loss"),
                    "optimizer": at("optimizer end") - at("backward end")},
    }
    if tc is None:
        res["torch_max_allocated"] = torch.cuda.max_memory_allocated()
    if a.mode == "default":
        # Note [Transfer bound]: the live-bytes curve, probed after the timed steps (memory_stats() costs host time),
        # against the marks' GPU times in the timed steps.
        n = len(step_marks)
        for i in range(3):
            step(warmup + a.steps + i, probe=True)
        probes = step_marks[n:]
        res["marks"] = [{"name": name, "t_s": at(name), "peak_live_bytes": max(p[k][2] for p in probes)}
                        for k, (name, _, _) in enumerate(probes[0]) if name not in ("start", "optimizer end")]
    if tc is not None:
        st = tc.stats()
        its = [r for r in st.get("iterations", []) if r["iteration"] > warmup]
        n = max(len(its), 1)
        res["tierpack"] = {
            "phase": st.get("phase"), "divergence": st.get("divergence"), "plan": st.get("plan"),
            "allocator": st.get("allocator"),
            "to_host_bytes_per_step": sum(r["bytes_to_host"] for r in its) / n,
            "to_device_bytes_per_step": sum(r["bytes_to_device"] for r in its) / n,
            "stalls_per_step": sum(r["stalls"] for r in its) / n,
            "stall_ms_per_step": sum(r["stall_ms"] for r in its) / n,
            "misses_per_step": sum(r["misses"] for r in its) / n,
            "remap_ms_per_step": sum(r["remap_ms"] for r in its) / n,
            "gates_per_step": sum(r.get("gates", 0) for r in its) / n,
            "gate_hold_ms_per_step": sum(r.get("gate_hold_ms", 0) for r in its) / n,
            "gate_timeouts": sum(r.get("gate_timeouts", 0) for r in its),
            "busy_gates_per_step": sum(r.get("busy_gates", 0) for r in its) / n,
            "failures": sum(r["failures"] for r in its),
            "verified_chunks_per_step": sum(r.get("verified_chunks", 0) for r in its) / n,
            "verify_ms_per_step": sum(r.get("verify_ms", 0) for r in its) / n,
            "pressure_waits_per_step": sum(r.get("pressure_waits", 0) for r in its) / n,
            "pressure_wait_ms_per_step": sum(r.get("pressure_wait_ms", 0) for r in its) / n,
            "spilled_chunks_per_step": sum(r.get("spilled_chunks", 0) for r in its) / n,
            "rewrites": sum(r.get("rewrites", 0) for r in its),
            "verify": st.get("verify"),
            "iterations": [{k: v for k, v in r.items() if k != "timeline"} for r in st.get("iterations", [])],
            "timeline_last": (its[-1]["timeline"] if its else []),
        }
    if a.mode == "default":
        # CUDA context and library overhead seen by NVML before any tensor exists in a process,
        # and pinned copy bandwidth per direction (the link the floor is computed with).
        res["pinned_h2d_Bps"], res["pinned_d2h_Bps"] = pinned_bandwidth(torch, dev)
    sampler.stop = True
    print("RESULT " + json.dumps(res), flush=True)


def pinned_bandwidth(torch, dev):
    """Pinned copy bandwidth (bytes/s) host->device and device->host: 1 GiB copies, median of 5 after one."""
    n = 1 << 30
    h = torch.empty(n, dtype=torch.uint8, pin_memory=True)
    d = torch.empty(n, dtype=torch.uint8, device=dev)

    def timed(fn):
        ts = []
        for _ in range(6):
            s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            s.record(); fn(); e.record(); e.synchronize()
            ts.append(s.elapsed_time(e) / 1e3)
        return n / statistics.median(ts[1:])
    return timed(lambda: d.copy_(h, non_blocking=True)), timed(lambda: h.copy_(d, non_blocking=True))


# ------------------------------------------------------------------------------------------- driver
def child(args, mode, budget=None, alloc_budget=None, warmup=None, timeout=None):
    timeout = timeout or args.child_timeout
    cmd = [sys.executable, os.path.abspath(__file__), "--child", mode, "--steps", str(args.steps),
           "--warmup", str(warmup if warmup is not None else args.warmup), "--layers", str(args.layers),
           "--batch", str(args.batch), "--seq", str(args.seq), "--lib", args.lib]
    if budget is not None:
        cmd += ["--budget", str(int(budget)), "--alloc-budget", str(int(alloc_budget))]
    if args.gpu_opts:
        cmd += ["--gpu-opts", args.gpu_opts]
    if args.deterministic:
        cmd += ["--deterministic"]
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    t0 = time.time()
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env)
    except subprocess.TimeoutExpired as e:
        return {"mode": mode, "budget": budget, "error": f"timed out after {timeout} s",
                "stderr": (e.stderr or b"")[-3000:].decode(errors="replace") if isinstance(e.stderr, bytes) else str(e.stderr)[-3000:]}
    if args.logs:
        os.makedirs(args.logs, exist_ok=True)
        name = mode + (f"_{int(budget)}" if budget is not None else "") + f"_{int(t0)}.stderr.txt"
        with open(os.path.join(args.logs, name), "w") as f:
            f.write(p.stderr)
    for line in p.stdout.splitlines():
        if line.startswith("RESULT "):
            r = json.loads(line[7:])
            r["wall_s"] = time.time() - t0
            r["stderr_tail"] = p.stderr[-2000:]
            return r
    return {"mode": mode, "budget": budget, "error": f"exit {p.returncode}", "stderr": p.stderr[-4000:]}


def add_run_args(ap):
    """The options this bench and ddp_bench.py share: the child's mode and per-process budget, the steps, the
    model's size."""
    ap.add_argument("--child")
    ap.add_argument("--alloc-budget", type=float)
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--tierpack-warmup", type=int, default=6)
    ap.add_argument("--layers", type=int, default=36)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--seq", type=int, default=1024)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_run_args(ap)
    ap.add_argument("--budget", type=float)
    ap.add_argument("--budgets", default="100,75,60,45,35")
    ap.add_argument("--modes", default="default,ckpt,save_on_cpu,tierpack")
    ap.add_argument("--lib", default=os.path.join(ROOT, "build", "lib", "libtierpack_cuda.so"))
    ap.add_argument("--gpu-opts", default="")
    ap.add_argument("--context-bytes", type=float, default=None,
                    help="NVML bytes of a CUDA context; default: measured (peak of a 1-tensor process)")
    ap.add_argument("--baseline", help="JSON written by an earlier run (--json): reuse its default run and context")
    ap.add_argument("--child-timeout", type=int, default=240)
    ap.add_argument("--json")
    ap.add_argument("--logs", help="folder for every child's whole stderr (tierpack's status and verify lines)")
    ap.add_argument("--deterministic", action="store_true",
                    help="torch.use_deterministic_algorithms(True), CUBLAS_WORKSPACE_CONFIG=:4096:8 and no cuDNN attention in every mode")
    a = ap.parse_args()
    if a.child:
        a.mode = a.child
        return run_child(a)

    modes = a.modes.split(",")
    results = []
    if a.baseline:
        prev = json.load(open(a.baseline))
        base = next(r for r in prev["results"] if r["mode"] == "default")
        a.context_bytes = prev["context_bytes"]
        base["reused_from"] = a.baseline
    else:
        base = child(a, "default")
    results.append(base)
    print(json.dumps({k: v for k, v in base.items() if k not in ("losses", "step_s", "stderr_tail")}), flush=True)
    if "error" in base:
        print(base.get("stderr", ""), file=sys.stderr)
        sys.exit(1)
    peak = base["peak_bytes"]
    ctx = a.context_bytes if a.context_bytes is not None else measure_context(a)
    save(a, results, ctx)
    for m in modes:
        if m in ("default",):
            continue
        if m == "tierpack":
            for pct in [float(x) for x in a.budgets.split(",")]:
                target = peak * pct / 100.0
                r = child(a, m, budget=target, alloc_budget=max(target - ctx, 1 << 30), warmup=a.tierpack_warmup)
                r["pct"] = pct
                results.append(r)
                brief = {k: v for k, v in r.items() if k not in ("losses", "step_s", "stderr_tail", "tierpack")}
                if "losses" in r:
                    n = min(len(r["losses"]), len(base["losses"]))
                    brief["loss_max_rel_diff"] = max(abs(r["losses"][i] - base["losses"][i]) / abs(base["losses"][i]) for i in range(n))
                    tp = r.get("tierpack", {})
                    brief.update({k: tp.get(k) for k in ("to_host_bytes_per_step", "to_device_bytes_per_step", "stalls_per_step",
                                                         "stall_ms_per_step", "gates_per_step", "gate_hold_ms_per_step", "failures",
                                                         "misses_per_step", "phase", "divergence", "rewrites",
                                                         "verify_ms_per_step")})
                print(json.dumps(brief), flush=True)
                save(a, results, ctx)
        else:
            # default_again: a second default run, to see how far two plain runs' losses differ.
            r = child(a, "default" if m == "default_again" else m)
            if m == "default_again":
                r["mode"] = "default (again)"
            results.append(r)
            print(json.dumps({k: v for k, v in r.items() if k not in ("losses", "step_s", "stderr_tail")}), flush=True)
            save(a, results, ctx)
    table = render(results, base, ctx)
    print(table)
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"results": results, "context_bytes": ctx, "table": table, "argv": sys.argv}, f, indent=1)


def save(a, results, ctx, table=None):
    """Writes the results so far (a run cut short by a timeout keeps what it measured)."""
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"results": results, "context_bytes": ctx, "table": table, "argv": sys.argv}, f, indent=1)


def measure_context(a):
    """NVML bytes held by a process that made a CUDA context and one small tensor (default allocator)."""
    code = (
        "import pynvml, torch, time\n"
        "pynvml.nvmlInit(); h = pynvml.nvmlDeviceGetHandleByIndex(0); b = pynvml.nvmlDeviceGetMemoryInfo(h).used\n"
        "x = torch.ones(1, device='cuda'); y = x @ x.view(1,1)\n"
        "torch.cuda.synchronize(); time.sleep(0.2)\n"
        "print(pynvml.nvmlDeviceGetMemoryInfo(h).used - b - torch.cuda.memory_reserved())\n")
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    try:
        return float(p.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        # No silent constant (issue 26): every budget below is set from this measurement.
        raise SystemExit("gpt2_bench: measuring the CUDA context failed (exit %d): %s; pass --context-bytes to give it"
                         % (p.returncode, (p.stderr.strip().splitlines() or ["no output"])[-1]))


def render(results, base, ctx):
    peak = base["peak_bytes"]
    step0 = base["median_step_s"]
    # The floor and the bound divide by these: a default run without them fails here, never a constant (issue 26).
    missing = [k for k in ("pinned_h2d_Bps", "pinned_d2h_Bps") if not base.get(k)]
    if missing:
        raise SystemExit(f"gpt2_bench: the default run has no pinned bandwidth measurement ({', '.join(missing)}): "
                         "rerun the default mode (it measures them) instead of reusing this baseline")
    bw_h2d = base["pinned_h2d_Bps"]
    bw_d2h = base["pinned_d2h_Bps"]
    losses0 = base["losses"]
    rows = []
    hdr = ("mode", "budget", "step ms", "tokens/s", "peak GiB", "to host GB/step", "to dev GB/step",
           "floor ms", "floor/step", "bound ms", "floor/bound", "stalls/step", "max loss rel.diff", "note")
    phases0 = base.get("phase_s")
    marks0 = base.get("marks")

    def bound(budget):
        """Note [Transfer bound] (bench/gpu/transfer_bound.py); (None, None) without the default run's marks."""
        if not phases0 or not marks0:
            return None, None
        return transfer_bound(step0, phases0["optimizer"], [(m["t_s"], m["peak_live_bytes"]) for m in marks0],
                              ctx, budget, bw_d2h)

    for r in results:
        if "error" in r:
            rows.append((r["mode"], f"{r.get('pct', '')}%" if r.get("pct") else "", "-", "-", "-", "-", "-", "-", "-", "-", "-",
                         "-", "-", r["error"]))
            continue
        step = r["median_step_s"]
        budget = r.get("budget")
        if budget:
            move = max(peak - budget, 0)
            floor = max(step0, move / bw_h2d, move / bw_d2h)
        else:
            floor = step0
        # A budgeted row's bound is at its budget; any other row's at the peak it reached (what a runtime placing tensors
        # holding that peak must take at least).
        b, _ = bound(budget if budget else r["peak_bytes"])
        tp = r.get("tierpack", {})
        # Step i against the default run's step i, for every step both runs made; a run with more steps than the
        # default (tierpack's longer warm-up) has its last ones uncompared, and the note says so (issue 26).
        n = min(len(r["losses"]), len(losses0))
        diff = max(abs(r["losses"][i] - losses0[i]) / abs(losses0[i]) for i in range(n)) if n else float("nan")
        note = ""
        if n < len(r["losses"]):
            note = f"losses compared at steps 0-{n - 1} of {len(r['losses'])} (last {len(r['losses']) - n} uncompared)"
        if tp:
            note = (note + "; " if note else "") + f"phase {tp.get('phase')}"
            if tp.get("divergence"):
                note += " (diverged)"
            if tp.get("misses_per_step"):
                note += f", misses/step {tp['misses_per_step']:.1f}"
            if tp.get("stalls_per_step"):
                note += f", stall {tp['stall_ms_per_step']:.0f} ms/step"
            if tp.get("gates_per_step"):
                note += f", {tp['gates_per_step']:.0f} gates/step ({tp.get('busy_gates_per_step', 0):.0f} busy) holding {tp['gate_hold_ms_per_step']:.0f} ms"
            if tp.get("failures"):
                note += f", {tp['failures']} failed moves"
            if tp.get("pressure_waits_per_step"):
                note += (f", {tp['pressure_waits_per_step']:.0f} allocations/step waited {tp['pressure_wait_ms_per_step']:.0f} ms"
                         f" for evictions, {tp.get('spilled_chunks_per_step', 0):.1f} chunks/step spilled")
            if tp.get("verified_chunks_per_step"):
                note += f", verify {tp['verify_ms_per_step']:.0f} ms/step, {tp.get('rewrites', 0)} rewrites"
            act = tp.get("activations")
            if act and act.get("per_step"):
                c = act["per_step"]
                note += (f", activations: {c['to_host_bytes'] / 1e9:.2f} GB out ({c['released_bytes'] / 1e9:.2f} let go, "
                         f"waited {c['release_wait_ms']:.0f} ms), {c['to_device_bytes'] / 1e9:.2f} GB back, "
                         f"{c['fetched_late']:.1f} late, {c['stalls']:.1f} waits, {c['divergences']:.1f} divergences")
            elif act:
                note += ", activations: none chosen"
        label = r["mode"] + (f" {r['pct']:.0f}%" if r.get("pct") else "")
        rows.append((label, f"{budget / GiB:.1f} GiB" if budget else "-", f"{step * 1e3:.0f}", f"{r['tokens_per_s']:.0f}",
                     f"{r['peak_bytes'] / GiB:.1f}",
                     f"{tp['to_host_bytes_per_step'] / 1e9:.2f}" if tp else "-",
                     f"{tp['to_device_bytes_per_step'] / 1e9:.2f}" if tp else "-",
                     f"{floor * 1e3:.0f}", f"{floor / step:.2f}",
                     f"{b * 1e3:.0f}" if b is not None else "-", f"{floor / b:.2f}" if b is not None else "-",
                     f"{tp['stalls_per_step']:.1f}" if tp else "-", f"{diff:.1e}", note))
    widths = [max(len(str(x[i])) for x in rows + [hdr]) for i in range(len(hdr))]
    line = lambda row: "| " + " | ".join(str(c).ljust(w) for c, w in zip(row, widths)) + " |"
    out = [line(hdr), "|" + "|".join("-" * (w + 2) for w in widths) + "|"] + [line(r) for r in rows]
    out.append(f"default peak {peak / GiB:.2f} GiB (NVML, over the timed steps); CUDA context ~{ctx / GiB:.2f} GiB "
               f"(tierpack's allocator budget = budget - context); pinned bandwidth H2D {bw_h2d / 1e9:.1f} GB/s, "
               f"D2H {bw_d2h / 1e9:.1f} GB/s; floor = max(default step, (default peak - budget) / bandwidth)")
    # Bench fairness (issue 26): what each mode got besides its timed steps.
    warm = sorted({(r["mode"], len(r.get("warmup_step_s", []))) for r in [base] + results if "error" not in r})
    out.append("warm-up steps before the timed ones: " + ", ".join(f"{m} {w}" for m, w in warm) +
               " (tierpack's include the iterations it observes and plans in); per-block timing hooks (a CUDA event after"
               " each block's forward and on each block output's gradient) run in the default mode only, so only the"
               " default row carries their cost; max loss rel.diff: step i against the default run's step i, over the"
               " steps both runs made")
    if phases0 and marks0:
        top = max(marks0, key=lambda m: m["peak_live_bytes"])
        sets = sorted({marks0[i]["name"] for i in (bound(r["budget"])[1] for r in results if r.get("budget")) if i is not None})
        out.append(f"bound = default step + max over {len(marks0)} marks t of the default run's forward and backward of"
                   f" ((live bytes before t + context - budget) / D2H bandwidth - (optimizer {phases0['optimizer'] * 1e3:.0f} ms"
                   f" + GPU time to t)): the least step of any runtime that only places tensors (no recomputation, no CPU optimizer)"
                   f" (Note [Transfer bound]); rows without a budget: at the peak they reached. Live peak"
                   f" {top['peak_live_bytes'] / GiB:.2f} GiB before '{top['name']}' ({top['t_s'] * 1e3:.0f} ms);"
                   f" the bound was set at: {', '.join(sets) if sets else '-'}")
    phase_rows = [r for r in results if "phase_s" in r]
    if phase_rows:
        out.append("")
        out.append("| mode | forward ms | backward ms | optimizer ms (GPU, CUDA events; medians of the timed steps) |")
        out.append("|---|---|---|---|")
        for r in phase_rows:
            p = r["phase_s"]
            label = r["mode"] + (f" {r['pct']:.0f}%" if r.get("pct") else "")
            out.append(f"| {label} | {p['forward'] * 1e3:.0f} | {p['backward'] * 1e3:.0f} | {p['optimizer'] * 1e3:.0f} |")
    return "\n".join(out)


if __name__ == "__main__":
    main()
