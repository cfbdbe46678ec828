#!/usr/bin/env python3
"""The GPU tier v2 table: four models under memory budgets, one table per model from one run.

Models (random init, bf16 autocast, AdamW, fixed seeds, no dropout; built on the GPU machine):
  gpt2      GPT-2 large written in plain torch (36 x 1280, 774M), batch 8, seq 1024 (bench/gpu/gpt2_bench.py)
  llama     a Llama-style decoder (transformers LlamaForCausalLM: RMSNorm, SwiGLU, rotary), 24 x 1536,
            FFN 4096, 16 heads, vocab 32000 (~0.78B), batch 8, seq 1024
  t5        an encoder-decoder (transformers T5ForConditionalGeneration, gated-GELU, T5 v1.1 large shape:
            24 + 24 x 1024, FFN 2816, 16 heads, vocab 32128 (~0.78B)), batch 8, 512 tokens in and out (batch 16 needed 69.7 GiB)
  resnet50  torchvision ResNet-50, batch 256, 224 x 224, channels-last
  hf-gpt2   Hugging Face GPT2LMHeadModel at GPT-2 large's shape (36 x 1280, 20 heads; its GELU is transformers'
            NewGELUActivation, Python arithmetic), batch 8, seq 1024, dropout 0

Modes, each in a fresh process:
  default             plain PyTorch
  ckpt                full activation checkpointing (gpt2: every block through torch.utils.checkpoint;
                      llama / t5: Hugging Face gradient_checkpointing_enable(); resnet50: checkpoint_sequential)
  compile-0.5/-0.3/-0.1  torch.compile with torch._functorch.config.activation_memory_budget 0.5 / 0.3 / 0.1
  compile             torch.compile with no memory budget (the base of tierpack+compile)
  tierpack            tierpack's GPU tier (mechanism:storage) at --budgets % of default's NVML peak
  tierpack-copy       the same with recompute:off (copies only: what making storages again saves)
  tierpack+ckpt       the same under ckpt, at --ckpt-budgets % of ckpt's peak
  tierpack+compile    the same under torch.compile, at --compile-budgets % of compile's peak
  tierpack+compile-0.5/-0.3/-0.1  the same under torch.compile with activation_memory_budget 0.5 / 0.3 / 0.1 (the compiler
                      recomputes, tierpack copies the rest out), at --compile-budgets % of compile's peak (no memory
                      budget)
  MODE/blocks, MODE/whole  a compiled mode with one graph per block (the graph broken before each block: Note
                      [Compile per block] in python/tierpack/compile_split.py) or one for the model; tierpack's
                      modes split by default (TIERPACK_GPU compile:blocks), the others do not

Per cell: median step (CUDA-synchronised wall time per step over --steps after the warm-up), NVML peak (device
memory in use, sampled every millisecond over the timed steps, less the process's baseline), bytes each way per
step (tierpack's counters), the transfer bound at that budget and the predicted step (the placer's cost model,
from tierpack's recorded iteration: placer/saved_plan.cpp), and the largest relative difference of the losses
from those of the same run without tierpack (loss_base; the default run's for the other modes). tierpack's budget
is the NVML budget less the CUDA context (measured in the default run): the memory PyTorch's allocator may hold. tierpack runs --tierpack-warmup warm-up steps (one reactive, one
recorded, one checking the plan), the others --warmup: said in the table.

Usage: python3 bench/gpu/models_bench.py [--models gpt2,llama,t5,resnet50] [--modes default,ckpt,tierpack,...]
         [--budgets 100,75,60,45,35] [--ckpt-budgets 75,60,45] [--compile-budgets 60] [--steps 10] [--warmup 3]
         [--tierpack-warmup 5] [--lib build/lib/libtierpack_cuda.so] [--json out.json] [--deterministic]
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
GiB = float(1 << 30)


# ---------------------------------------------------------------------------------------------- models
MODELS = ("gpt2", "llama", "t5", "resnet50", "hf-gpt2")
# the modes run under torch.compile with an activation memory budget (torch._functorch.config.activation_memory_budget)
COMPILE_BUDGETS = {"compile-0.5": 0.5, "compile-0.3": 0.3, "compile-0.1": 0.1}


def build(torch, name, ckpt):
    """(model, make_batch(i) -> inputs, loss_fn(model, inputs) -> loss, units per step, unit name)."""
    import torch.nn.functional as F
    from torch.utils.checkpoint import checkpoint_sequential

    g = torch.Generator(device="cuda").manual_seed(1234)
    if name == "gpt2":
        sys.path.insert(0, HERE)
        from gpt2_bench import build_model

        model = build_model(torch, 36, 1280, 20, 50257, 1024, ckpt=ckpt)
        data = [torch.randint(0, 50257, (8, 1025), device="cuda", generator=g) for _ in range(4)]

        def loss_fn(m, x):
            logits = m(x[:, :-1])
            return F.cross_entropy(logits.float().view(-1, logits.shape[-1]), x[:, 1:].reshape(-1))
        return model, lambda i: data[i % 4], loss_fn, 8 * 1024, "tokens"
    if name == "hf-gpt2":
        from transformers import GPT2Config, GPT2LMHeadModel

        cfg = GPT2Config(n_layer=36, n_embd=1280, n_head=20, n_positions=1024, resid_pdrop=0.0, embd_pdrop=0.0,
                         attn_pdrop=0.0, use_cache=False)
        cfg._attn_implementation = "sdpa"
        model = GPT2LMHeadModel(cfg)
        if ckpt:
            model.gradient_checkpointing_enable()
        data = [torch.randint(0, 50257, (8, 1024), device="cuda", generator=g) for _ in range(4)]
        return model, lambda i: data[i % 4], lambda m, x: m(input_ids=x, labels=x).loss, 8 * 1024, "tokens"
    if name == "llama":
        from transformers import LlamaConfig, LlamaForCausalLM

        cfg = LlamaConfig(vocab_size=32000, hidden_size=1536, intermediate_size=4096, num_hidden_layers=24,
                          num_attention_heads=16, num_key_value_heads=16, max_position_embeddings=1024,
                          attention_dropout=0.0, tie_word_embeddings=False)
        cfg._attn_implementation = "sdpa"
        model = LlamaForCausalLM(cfg)
        if ckpt:
            model.gradient_checkpointing_enable()
        model.config.use_cache = False
        data = [torch.randint(0, 32000, (8, 1024), device="cuda", generator=g) for _ in range(4)]
        return model, lambda i: data[i % 4], lambda m, x: m(input_ids=x, labels=x).loss, 8 * 1024, "tokens"
    if name == "t5":
        from transformers import T5Config, T5ForConditionalGeneration

        cfg = T5Config(vocab_size=32128, d_model=1024, d_kv=64, d_ff=2816, num_layers=24, num_decoder_layers=24,
                       num_heads=16, feed_forward_proj="gated-gelu", dropout_rate=0.0, tie_word_embeddings=False,
                       decoder_start_token_id=0, pad_token_id=0, use_cache=False)
        # (use_cache in the config it is built from: with model.config.use_cache = False set afterwards, as before, its
        # decoder layers were still called with an EncoderDecoderCache (the log of bench/results/gpu-h200-2026-12-02-4,
        # call 3; T5 builds its decoder from a copy of the config), so tierpack never ran them again)
        model = T5ForConditionalGeneration(cfg)
        if ckpt:
            model.gradient_checkpointing_enable()
        src = [torch.randint(0, 32128, (8, 512), device="cuda", generator=g) for _ in range(4)]
        tgt = [torch.randint(0, 32128, (8, 512), device="cuda", generator=g) for _ in range(4)]
        return (model, lambda i: (src[i % 4], tgt[i % 4]),
                lambda m, x: m(input_ids=x[0], labels=x[1]).loss, 8 * 1024, "tokens")
    if name == "resnet50":
        import torch.nn as nn
        import torchvision

        net = torchvision.models.resnet50()
        if ckpt:  # a ReLU in place on a checkpointed segment's input breaks its recomputation (call 4)
            for m in net.modules():
                if isinstance(m, nn.ReLU):
                    m.inplace = False
        seq = nn.Sequential(net.conv1, net.bn1, net.relu, net.maxpool, net.layer1, net.layer2, net.layer3, net.layer4,
                            net.avgpool, nn.Flatten(1), net.fc)
        seq = seq.to(memory_format=torch.channels_last)
        imgs = [torch.randn(256, 3, 224, 224, device="cuda", generator=g).to(memory_format=torch.channels_last)
                for _ in range(2)]
        labels = [torch.randint(0, 1000, (256,), device="cuda", generator=g) for _ in range(2)]

        def loss_fn(m, x):
            out = checkpoint_sequential(m, 8, x[0], use_reentrant=False) if ckpt else m(x[0])
            return F.cross_entropy(out.float(), x[1])
        return seq, lambda i: (imgs[i % 2], labels[i % 2]), loss_fn, 256, "images"
    raise SystemExit("models_bench: unknown model '%s' (%s)" % (name, ", ".join(MODELS)))


# ----------------------------------------------------------------------------------------- one cell
def run_child(a):
    sys.path.insert(0, HERE)
    from gpt2_bench import NvmlSampler

    sampler = NvmlSampler()  # before CUDA exists in this process: its baseline excludes us
    tc = None
    split = a.mode.partition("/")[2]  # MODE/blocks, MODE/whole (Note [Compile per block])
    if a.mode.startswith("tierpack"):
        sys.path.insert(0, os.path.join(ROOT, "python"))
        import tierpack.cuda as tc
        opts = "mechanism:storage" + (",recompute:off" if a.mode == "tierpack-copy" else "") + \
            (",compile:" + split if split else "")
        tc.install(budget=int(a.alloc_budget), gpu=opts + ("," + a.gpu_options if a.gpu_options else ""), path=a.lib,
                   conf="stats_out:" + a.stats_out if a.stats_out else None)
    if a.deterministic:
        os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
    import torch

    if a.deterministic:
        torch.use_deterministic_algorithms(True, warn_only=False)
        torch.backends.cuda.enable_cudnn_sdp(False)
        torch.backends.cudnn.benchmark = False
    torch.manual_seed(0)
    torch.backends.cuda.matmul.allow_tf32 = True
    torch.backends.cudnn.allow_tf32 = True
    ckpt = a.mode in ("ckpt", "tierpack+ckpt")
    compiled = a.mode.startswith("compile") or a.mode.startswith("tierpack+compile")
    with torch.device("cuda"):
        torch.ones(1)
        context = max(sampler.used() - sampler.base - torch.cuda.memory_reserved(), 0)
        model, batch, loss_fn, units, unit = build(torch, a.model, ckpt)
    model.train()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    fwd = model
    if compiled:
        if a.compile_budget is not None:
            torch._functorch.config.activation_memory_budget = a.compile_budget
        if split == "blocks" and tc is None:  # without tierpack: the same graph breaks, no mover
            sys.path.insert(0, os.path.join(ROOT, "python"))
            from tierpack.compile_split import CompileSplit
            CompileSplit(torch, lambda m: print(m, file=sys.stderr)).split_blocks(model)
        fwd = torch.compile(model)

    def step(i):
        opt.zero_grad(set_to_none=True)
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = loss_fn(fwd, batch(i))
        loss.backward()
        opt.step()
        return loss

    losses, warm, times, issued = [], [], [], []
    for i in range(a.warmup):
        t0 = time.perf_counter()
        losses.append(step(i).item())
        warm.append(time.perf_counter() - t0)
    torch.cuda.synchronize()
    sampler.reset()
    before = torch.cuda.memory_stats()
    for i in range(a.steps):
        t0 = time.perf_counter()
        loss = step(a.warmup + i)
        issued.append(time.perf_counter() - t0)  # the host's time to queue the step: near the step, host-bound
        torch.cuda.synchronize()
        times.append(time.perf_counter() - t0)
        losses.append(loss.item())
    peak = sampler.peak_bytes()
    med = statistics.median(times)
    mem = torch.cuda.memory_stats()
    keys = ("allocated_bytes.all.current", "allocated_bytes.all.peak", "reserved_bytes.all.current",
            "reserved_bytes.all.peak", "inactive_split_bytes.all.current", "inactive_split_bytes.all.peak",
            "num_alloc_retries", "num_device_alloc", "num_device_free", "num_sync_all_streams")
    torch_stats = {k: mem.get(k) for k in keys}
    # the allocator's retries (it gave its cache back, synchronising the device, and tried again) in the timed steps
    timed_stats = {k: (mem.get(k) or 0) - (before.get(k) or 0) for k in ("num_alloc_retries", "num_sync_all_streams")}
    profile = None
    if a.profile == "python":
        python_profile(torch, lambda: step(a.warmup + a.steps))
    elif a.profile:
        profile = stream_profile(torch, lambda: step(a.warmup + a.steps), a.profile)
    if a.snapshot:
        # One more step with the allocator's history (every alloc, free, map and unmap; no stacks), as a pickle
        # for torch.cuda.memory's tools (https://pytorch.org/memory_viz).
        import pickle
        torch.cuda.synchronize()
        torch.cuda.memory._record_memory_history(enabled="all", context=None, stacks="python", max_entries=400000)
        step(a.warmup + a.steps + 1)
        torch.cuda.synchronize()
        with open(a.snapshot, "wb") as f:
            pickle.dump(torch.cuda.memory._snapshot(), f)
        torch.cuda.memory._record_memory_history(enabled=None)
    res = {"model": a.model, "mode": a.mode, "budget": a.budget, "alloc_budget": a.alloc_budget,
           "median_step_s": med, "units_per_s": units / med, "unit": unit, "peak_bytes": peak, "losses": losses,
           "warmup_step_s": warm, "step_s": times, "issued_s": issued, "context_bytes": context,
           "torch_max_reserved": torch.cuda.max_memory_reserved(), "torch_stats": torch_stats,
           "timed_torch_stats": timed_stats,
           "stream_profile": profile, "gpu_options": a.gpu_options, "gpu": torch.cuda.get_device_name()}
    if compiled:  # how many graphs Dynamo made, and its graph breaks (Note [Compile per block])
        from torch._dynamo.utils import counters
        res["dynamo"] = {"unique_graphs": counters["stats"]["unique_graphs"],
                         "graph_breaks": sum(counters["graph_break"].values()),
                         "break_reasons": sorted(counters["graph_break"])[:5]}
    if tc is not None:
        st = tc.stats()
        timed = timed_of(st["iterations"], a.warmup, a.steps)
        n = max(len(timed), 1)
        res["tierpack"] = {"phase": st["phase"], "plan": st["plan"], "limit": st["limit"], "budget": st["budget"],
                           "bytes_out_per_step": sum(h["bytes_out"] for h in timed) / n,
                           "bytes_in_per_step": sum(h["bytes_in"] for h in timed) / n,
                           "fetched_late_per_step": sum(h["fetched_late"] for h in timed) / n,
                           "hook_host_ms_per_step": sum(h["host_ms"] for h in timed) / n,
                           "hook_calls_per_step": sum(h["calls"] for h in timed) / n,
                           "peak_reserved_per_step": max(h.get("peak_reserved", 0) for h in timed),
                           "divergences": sum(h["divergences"] for h in timed),
                           "modes": [h["mode"] for h in st["iterations"]],
                           "iterations": st["iterations"], "trials": st.get("trials", [])}
    if a.mode == "default":
        res["pinned_d2h_Bps"], res["pinned_h2d_Bps"] = pinned_bandwidth(torch)
    sampler.stop = True
    print("RESULT " + json.dumps(res), flush=True)


def python_profile(torch, one_step, top=30):
    """One more step under cProfile: where the host's time went (the hooks' own functions, torch's calls they
    make), the `top` functions by their own time and tierpack's `top` by their cumulative time, to stderr (the
    child's log)."""
    import cProfile
    import pstats

    torch.cuda.synchronize()
    prof = cProfile.Profile()
    t0 = time.perf_counter()
    prof.enable()
    one_step()
    torch.cuda.synchronize()
    prof.disable()
    print("python profile: one step, %.1f ms wall under cProfile" % ((time.perf_counter() - t0) * 1e3), file=sys.stderr)
    stats = pstats.Stats(prof, stream=sys.stderr)
    stats.sort_stats("tottime").print_stats(top)
    stats.sort_stats("cumulative").print_stats("tierpack", top)  # the hooks' functions with what they call


def stream_profile(torch, one_step, path):
    """One more step under torch.profiler: per CUDA stream, the time its kernels and copies kept it busy, and
    for the stream that ran the most kernels (compute) the time it sat idle within the step; copies' bytes
    each way. The trace goes to `path` (Chrome format) when it ends in .json."""
    import tempfile
    from torch.profiler import ProfilerActivity, profile
    from trace_phases import union  # (bench/gpu, beside this script)

    torch.cuda.synchronize()
    t0 = time.perf_counter()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        one_step()
        torch.cuda.synchronize()
    wall = (time.perf_counter() - t0) * 1e3
    out = path if path.endswith(".json") else tempfile.mktemp(suffix=".json")
    prof.export_chrome_trace(out)
    with open(out) as f:
        evs = json.load(f)["traceEvents"]
    if out != path:
        os.unlink(out)
    streams, lo, hi, runtime, kernels = {}, None, None, {}, {}
    for e in evs:
        if e.get("ph") == "X" and e.get("cat") == "cuda_runtime":  # host calls that may wait: syncs, mallocs
            r = runtime.setdefault(e.get("name", ""), [0, 0.0])
            r[0] += 1; r[1] += e.get("dur", 0) / 1e3
        if e.get("ph") != "X" or e.get("cat") not in ("kernel", "gpu_memcpy", "gpu_memset"):
            continue
        st = (e.get("args") or {}).get("stream")
        s = streams.setdefault(st, {"spans": [], "kernels": 0, "d2h_bytes": 0, "h2d_bytes": 0, "copies": 0})
        s["spans"].append((e["ts"], e["ts"] + e["dur"]))
        name = e.get("name", "")
        if e["cat"] == "kernel":
            s["kernels"] += 1
            k = kernels.setdefault((st, name[:60]), [0, 0.0])
            k[0] += 1; k[1] += e["dur"] / 1e3
        elif "DtoH" in name or "Device -> Pinned" in name:
            s["d2h_bytes"] += (e.get("args") or {}).get("bytes", 0); s["copies"] += 1
        elif "HtoD" in name or "Pinned -> Device" in name:
            s["h2d_bytes"] += (e.get("args") or {}).get("bytes", 0); s["copies"] += 1
        lo = e["ts"] if lo is None else min(lo, e["ts"])
        hi = e["ts"] + e["dur"] if hi is None else max(hi, e["ts"] + e["dur"])
    summary = {"wall_ms": wall, "gpu_span_ms": ((hi or 0) - (lo or 0)) / 1e3, "streams": {}}
    for st, s in streams.items():
        summary["streams"][str(st)] = {"busy_ms": union(s["spans"]) / 1e3, "kernels": s["kernels"],
                                       "copies": s["copies"], "d2h_gb": s["d2h_bytes"] / 1e9,
                                       "h2d_gb": s["h2d_bytes"] / 1e9}
    if streams:
        comp = max(streams, key=lambda k: streams[k]["kernels"])
        c = summary["streams"][str(comp)]
        c["compute"] = True
        c["idle_ms"] = summary["gpu_span_ms"] - c["busy_ms"]
        spans, gaps, end = sorted(streams[comp]["spans"]), [], None
        for a0, b0 in spans:
            if end is not None and a0 > end:
                gaps.append(((a0 - end) / 1e3, (end - lo) / 1e3))
            end = b0 if end is None else max(end, b0)
        gaps.sort(reverse=True)
        c["gaps_over_1ms"] = [len([g for g in gaps if g[0] > 1]), sum(g[0] for g in gaps if g[0] > 1)]
        c["largest_gaps_ms_at_ms"] = [[round(g, 2), round(t, 1)] for g, t in gaps[:8]]
        top = sorted(((v[1], v[0], n) for (st, n), v in kernels.items() if st == comp), reverse=True)[:10]
        c["top_kernels"] = [[n, cnt, round(ms, 2)] for ms, cnt, n in top]
    summary["host_calls"] = {n: [v[0], round(v[1], 2)] for n, v in sorted(runtime.items(), key=lambda kv: -kv[1][1])[:10]}
    print("PROFILE " + json.dumps(summary), flush=True)
    return summary


def pinned_bandwidth(torch):
    """Pinned copy bandwidth (bytes/s) device->host and host->device: 1 GiB copies, median of 5 after one."""
    n = 1 << 30
    h = torch.empty(n, dtype=torch.uint8, pin_memory=True)
    d = torch.empty(n, dtype=torch.uint8, device="cuda")

    def timed(fn):
        ts = []
        for _ in range(6):
            s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            s.record()
            fn()
            e.record()
            e.synchronize()
            ts.append(s.elapsed_time(e) / 1e3)
        return n / statistics.median(ts[1:])
    return timed(lambda: h.copy_(d, non_blocking=True)), timed(lambda: d.copy_(h, non_blocking=True))


# -------------------------------------------------------------------------------------------- parent
def child(a, model, mode, warmup, budget=None, alloc_budget=None, compile_budget=None):
    cmd = [sys.executable, os.path.abspath(__file__), "--child", "--model", model, "--mode", mode,
           "--steps", str(a.steps), "--warmup", str(warmup), "--lib", a.lib]
    if a.gpu_options and mode.startswith("tierpack"):
        cmd += ["--gpu-options", a.gpu_options]
    if a.snapshot and mode.startswith("tierpack"):
        cmd += ["--snapshot", "%s.%s.%s.pickle" % (a.snapshot, model, "%d" % (budget or 0))]
    if budget is not None:
        cmd += ["--budget", str(int(budget)), "--alloc-budget", str(int(alloc_budget))]
    if compile_budget is not None:
        cmd += ["--compile-budget", str(compile_budget)]
    if a.deterministic:
        cmd.append("--deterministic")
    label = "%s %s%s" % (model, mode, "" if budget is None else " %.2f GiB" % (budget / GiB))
    name = label.replace(" ", "_").replace("/", "_")
    if a.profile:  # one trace per child: <path without .json>.<cell>.json
        cmd += ["--profile", a.profile[:-5] + "." + name + ".json" if a.profile.endswith(".json") else a.profile]
    if a.logs and mode.startswith("tierpack"):  # the run's statistics and its .gpu0.saved.json (tierpack gpu-replay)
        os.makedirs(a.logs, exist_ok=True)
        cmd += ["--stats-out", os.path.join(a.logs, name + ".stats.json")]
    t0 = time.time()
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=a.child_timeout)
        out, err, rc = p.stdout, p.stderr, p.returncode
    except subprocess.TimeoutExpired as e:
        out = e.stdout.decode() if isinstance(e.stdout, bytes) else (e.stdout or "")
        err = (e.stderr.decode() if isinstance(e.stderr, bytes) else (e.stderr or "")) + "\nTIMEOUT (no result)"
        rc = "timeout"
    if a.logs:
        os.makedirs(a.logs, exist_ok=True)
        with open(os.path.join(a.logs, name + ".log"), "w") as f:
            f.write(out + "\n--- stderr\n" + err)
    for line in out.splitlines():
        if line.startswith("RESULT "):
            r = json.loads(line[7:])
            print("  %-40s %7.1f ms  peak %6.2f GiB  (%.0f s)" % (label, r["median_step_s"] * 1e3, r["peak_bytes"] / GiB,
                                                                  time.time() - t0), flush=True)
            return r
    tail = [ln for ln in err.splitlines() if ln.strip()][-3:]
    print("  %-40s FAILED (rc %s): %s" % (label, rc, " | ".join(tail)[-400:]), flush=True)
    return {"model": model, "mode": mode, "budget": budget, "failed": True, "rc": str(rc), "error": " | ".join(tail)[-1000:]}


def bound_for(r):
    plan = (r.get("tierpack") or {}).get("plan") or {}
    return plan.get("bound_ms"), plan.get("predicted_ms")


def retries_per_step(r):
    """The allocator's retries per timed step (None for results from before they were counted): under limit:hard an
    allocation that finds no room gives the cache back, which synchronises the device (Note [Allocator retries] in
    python/tierpack/reserved_memory.py)."""
    t = r.get("timed_torch_stats")
    return t["num_alloc_retries"] / len(r["step_s"]) if t and r.get("step_s") else None


def budget_label(r):
    """'75% (22.4 GiB)' of the default peak, '100% of ckpt (21.1 GiB)' of another mode's; '-' for no budget."""
    if r.get("budget_pct") is None:
        return "-"
    of = r.get("budget_of") or "default"
    return "%d%%%s (%.1f GiB)" % (r["budget_pct"], "" if of == "default" else " of " + of, r["budget"] / GiB)


def timed_of(iterations, warmup, steps):
    """The mover's statistics of the timed steps: it counts optimizer steps from 1, the warm-up steps come
    first, and a profiled or recorded step after them is not timed."""
    return [h for h in iterations if warmup < h["iteration"] <= warmup + steps]


def timed_iterations(r):
    """timed_of for a result row ([] for rows without tierpack)."""
    return timed_of((r.get("tierpack") or {}).get("iterations") or [], len(r.get("warmup_step_s", [])),
                    len(r.get("step_s", [])))


def step_notes(rows):
    """Per tierpack row, each timed step beside what the hooks' host, Python's collector and new pinned memory
    took in its iteration: which of them a slow step had more of (Note [Python's collector])."""
    lines = []
    for r in rows:
        if r.get("failed") or not r.get("issued_s"):
            continue
        # the host's time to queue each timed step (before the step's synchronize): a step within a few ms of
        # it waited for the host (host-bound), one well over it for the GPU
        lines.append("- %s %s: steps %s ms, queued by the host in %s ms" % (
            r["mode"], budget_label(r), [round(t * 1e3) for t in r["step_s"]],
            [round(t * 1e3) for t in r["issued_s"]]))
    for r in rows:
        t = r.get("timed_torch_stats")
        if not r.get("failed") and t and t["num_alloc_retries"]:
            lines.append("- %s %s: the allocator retried %d times in the %d timed steps (%d synchronisations of all "
                         "streams)" % (r["mode"], budget_label(r), t["num_alloc_retries"], len(r["step_s"]),
                                       t["num_sync_all_streams"]))
    for r in rows:
        timed = timed_iterations(r)
        if r.get("failed") or not timed or len(timed) != len(r.get("step_s", [])):
            continue
        lines.append("- %s %s: steps %s ms; hooks' host %s ms; collector %s ms (full: %s); new pinned %s MB" % (
            r["mode"], budget_label(r), [round(t * 1e3) for t in r["step_s"]], [round(h["host_ms"]) for h in timed],
            [round(h.get("gc_ms", 0)) for h in timed], [h.get("gc_full", 0) for h in timed],
            [round(h.get("pinned_new", 0) / 1e6) for h in timed]))
    for r in rows:
        if r.get("dynamo"):
            d = r["dynamo"]
            lines.append("- %s %s: Dynamo made %d graphs, %d graph breaks (%s)" % (
                r["mode"], budget_label(r), d["unique_graphs"], d["graph_breaks"], "; ".join(d["break_reasons"])[:200]))
    for r in rows:  # Note [Measured plans]: plans made for a measured cost, against the plan each replaced
        for t in (r.get("tierpack") or {}).get("trials") or []:
            lines.append("- %s %s: the plan from iteration %d (made for %s) ran %.1f ms a step against %.1f ms for "
                         "the plan from iteration %d: %s" % (
                             r["mode"], budget_label(r), t["plan_from"], t["why"], t["step_ms"], t["before_ms"],
                             t["before_from"], "kept" if t["kept"] else "went back to that plan"))
    return lines


def table(a, model, rows, commit):
    """Rows of gpu-latest.json for one model, and its printed table."""
    base = next((r for r in rows if r["mode"] == "default" and not r.get("failed")), None)
    out, lines = [], []
    ck = next((r for r in rows if r["mode"] == "ckpt" and not r.get("failed")), None)
    lines.append("| mode | budget | step ms | x default | x ckpt | NVML peak GiB | held GiB | GB out / in per step | GB remade | bound ms | "
                 "bound/step | predicted ms | pred. err | max loss rel. diff (against) |")
    lines.append("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        row = {"model": model, "mode": r["mode"], "budget_pct": r.get("budget_pct"), "budget_of": r.get("budget_of"),
               "commit": commit, "gpu_options": (a.gpu_options or None) if r["mode"].startswith("tierpack") else None,
               "deterministic": bool(a.deterministic), "gpu": r.get("gpu")}
        if r.get("failed"):
            lines.append("| %s | %s | FAILED (%s) | | | | | | | | | | | |" % (r["mode"], budget_label(r), r.get("error", "")[:120]))
            row.update(step_ms=None, failed=True, error=r.get("error"))
            out.append(row)
            continue
        step = r["median_step_s"] * 1e3
        tp = r.get("tierpack") or {}
        bound, pred = bound_for(r)
        diff, against = None, loss_base(r, rows)
        if against is not None:
            n = min(len(against["losses"]), len(r["losses"]))
            diff = max(abs(x - y) / max(abs(y), 1e-12) for x, y in zip(r["losses"][:n], against["losses"][:n]))
        # What tierpack's allocator held at most over the timed steps, plus the context it measured: the NVML
        # peak's own account of the same memory (bench/results/gpu-h200-2026-12-01-2, calls 4-5).
        timed = timed_iterations(r)
        held = (max(h.get("peak_reserved", 0) for h in timed) + ((tp.get("plan") or {}).get("context_bytes") or 0)) / GiB \
            if timed else None
        remade = ((tp.get("plan") or {}).get("bytes_recomputed") or 0) if tp else None
        row.update(step_ms=step, nvml_peak_gib=r["peak_bytes"] / GiB, held_gib=held, bytes_recomputed=remade, bytes_out=tp.get("bytes_out_per_step"),
                   bytes_in=tp.get("bytes_in_per_step"), bound_ms=bound, predicted_ms=pred,
                   fits=(tp.get("plan") or {}).get("fits"), max_loss_rel_diff=diff,
                   loss_base=against["mode"] if against is not None else None,
                   budget_gib=(r["budget"] / GiB if r.get("budget") else None),
                   late_fetches_per_step=tp.get("fetched_late_per_step"), divergences=tp.get("divergences"),
                   warmup_steps=len(r.get("warmup_step_s", [])),
                   alloc_retries_per_step=retries_per_step(r))
        out.append(row)
        lines.append("| %s | %s | %.1f | %s | %s | %.2f | %s | %s | %s | %s | %s | %s | %s | %s |" % (
            r["mode"], budget_label(r), step, "%.2f" % (step / (base["median_step_s"] * 1e3)) if base else "-",
            "%.2f" % (step / (ck["median_step_s"] * 1e3)) if ck else "-", r["peak_bytes"] / GiB,
            "-" if held is None else "%.2f" % held,
            "-" if not tp else "%.2f / %.2f" % (tp["bytes_out_per_step"] / 1e9, tp["bytes_in_per_step"] / 1e9),
            "-" if not remade else "%.2f" % (remade / 1e9),
            "-" if bound is None else "%.1f" % bound, "-" if bound is None else "%.2f" % (bound / step),
            "-" if pred is None else "%.1f" % pred, "-" if pred is None else "%+.1f%%" % ((pred - step) / step * 100),
            "-" if diff is None else "%.1e (%s)" % (diff, against["mode"])))
    return out, lines


def loss_base(r, rows):
    """The row whose losses r's should equal bit for bit: for a tierpack mode the same run without tierpack
    (tierpack+ckpt: ckpt; tierpack+compile-0.1: compile-0.1/blocks, split per block as tierpack splits it by
    default; tierpack+compile-0.1/whole: compile-0.1), for any other mode the default run. None when that row is
    not in rows (another split compiles other kernels, so it is no base)."""
    ok = lambda mode: next((x for x in rows if x["mode"] == mode and not x.get("failed")), None)
    mode = r["mode"]
    if mode == "default":
        return None
    if not mode.startswith("tierpack+"):  # default's own modes, tierpack and tierpack-copy
        return ok("default")
    bare, _, split = mode[len("tierpack+"):].partition("/")
    if "compile" not in bare:
        return ok(bare)
    return ok(bare + "/whole") or ok(bare) if split == "whole" else ok(bare + "/blocks")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--model", help=argparse.SUPPRESS)
    ap.add_argument("--mode", help=argparse.SUPPRESS)
    ap.add_argument("--budget", type=float, help=argparse.SUPPRESS)
    ap.add_argument("--alloc-budget", type=float, help=argparse.SUPPRESS)
    ap.add_argument("--stats-out", default="", help=argparse.SUPPRESS)
    ap.add_argument("--compile-budget", type=float, help=argparse.SUPPRESS)
    ap.add_argument("--models", default="gpt2,llama,t5,resnet50", help="of: " + ", ".join(MODELS))
    ap.add_argument("--modes", default="default,ckpt,compile-0.5,compile-0.1,tierpack,tierpack+ckpt,compile,tierpack+compile")
    ap.add_argument("--budgets", default="100,75,60,45,35")
    ap.add_argument("--ckpt-budgets", default="75,60,45")
    ap.add_argument("--compile-budgets", default="60")
    ap.add_argument("--at-ckpt-budgets", default="", help="also run tierpack and tierpack-copy (no checkpointing) at these %% "
                    "of ckpt's NVML peak (issue 23's rows: 100 and 60); needs the ckpt mode before them")
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--tierpack-warmup", type=int, default=5)
    ap.add_argument("--lib", default=os.path.join(ROOT, "build", "lib", "libtierpack_cuda.so"))
    ap.add_argument("--child-timeout", type=float, default=240)
    ap.add_argument("--deterministic", action="store_true")
    ap.add_argument("--snapshot", default="", help="the allocator's history of one more step per tierpack cell, "
                    "to <this>.<model>.<budget bytes>.pickle")
    ap.add_argument("--gpu-options", default="", help="more TIERPACK_GPU options for the tierpack modes (e.g. limit:hard)")
    ap.add_argument("--profile", default="", help="profile one more step per cell under torch.profiler: 'summary' "
                    "prints its per-stream busy times, a path ending in .json also keeps each child's trace (<path less .json>."
                    "<cell>.json); 'python': under "
                    "cProfile instead, its top functions by own time in the cell's log")
    ap.add_argument("--json", help="write every result and the table rows here")
    ap.add_argument("--logs", help="write each child's output here, and each tierpack cell's statistics with its "
                                   "recorded iteration and plan (<cell>.stats.gpu0.saved.json: tierpack gpu-replay)")
    ap.add_argument("--commit", default=os.environ.get("TIERPACK_COMMIT", ""))
    a = ap.parse_args()
    if a.child:
        return run_child(a)
    models = [m for m in a.models.split(",") if m]
    modes = [m for m in a.modes.split(",") if m]
    known = {"default", "ckpt", "compile", "tierpack", "tierpack-copy", "tierpack+ckpt", "tierpack+compile"} | \
        set(COMPILE_BUDGETS) | {"tierpack+" + m for m in COMPILE_BUDGETS}
    def unknown_mode(m):
        bare, _, split = m.partition("/")  # MODE/blocks, MODE/whole: compiled modes only
        return bare not in known or split not in ("", "blocks", "whole") or (split and "compile" not in bare)
    bad = [m for m in modes if unknown_mode(m)]
    if bad or not models:
        raise SystemExit("models_bench: unknown mode(s) %s (known: %s; /blocks and /whole only after a compiled mode)" % (
            ", ".join(bad), ", ".join(sorted(known))))
    unknown = [m for m in models if m not in MODELS]
    if unknown:
        raise SystemExit("models_bench: unknown model(s) %s (known: %s)" % (", ".join(unknown), ", ".join(MODELS)))
    pcts = lambda s: [int(x) for x in s.split(",") if x]
    all_rows, results = [], []
    for model in models:
        print("== %s" % model, flush=True)
        rows = []
        base = child(a, model, "default", a.warmup)
        base["budget_pct"] = None
        rows.append(base)
        if base.get("failed"):
            results += rows
            continue
        ctx = base["context_bytes"]

        def budgeted(mode, of, pct_list, of_name=None, compile_budget=None):
            for pct in pct_list:
                b = of * pct / 100.0
                r = child(a, model, mode, a.tierpack_warmup, budget=b, alloc_budget=max(b - ctx, 1 << 30),
                          compile_budget=compile_budget)
                r["budget_pct"] = pct
                r["budget_of"] = of_name or ("compile" if mode.startswith("tierpack+compile") else
                                             {"tierpack+ckpt": "ckpt"}.get(mode, "default"))
                r.setdefault("budget", b)
                rows.append(r)

        for mode in modes:
            bare = mode.partition("/")[0]  # without /blocks or /whole
            if mode == "default":
                continue
            if bare in ("ckpt", "compile") or bare in COMPILE_BUDGETS:
                r = child(a, model, mode, a.warmup, compile_budget=COMPILE_BUDGETS.get(bare))
                r["budget_pct"] = None
                rows.append(r)
            elif mode in ("tierpack", "tierpack-copy"):
                budgeted(mode, base["peak_bytes"], pcts(a.budgets))
                ck = next((r for r in rows if r["mode"] == "ckpt" and not r.get("failed")), None)
                if ck and a.at_ckpt_budgets:
                    budgeted(mode, ck["peak_bytes"], pcts(a.at_ckpt_budgets), "ckpt")
            elif mode == "tierpack+ckpt":
                ck = next((r for r in rows if r["mode"] == "ckpt" and not r.get("failed")), None)
                if ck:
                    budgeted("tierpack+ckpt", ck["peak_bytes"], pcts(a.ckpt_budgets))
            elif mode.startswith("tierpack+compile"):
                co = next((r for r in rows if r["mode"] == "compile" and not r.get("failed")), None)
                if co:
                    budgeted(mode, co["peak_bytes"], pcts(a.compile_budgets),
                             compile_budget=COMPILE_BUDGETS.get(bare[len("tierpack+"):]))
        t_rows, lines = table(a, model, rows, a.commit)
        all_rows += t_rows
        results += rows
        print("\n### %s (default %.1f ms, %.2f GiB NVML; context %.2f GiB; pinned D2H %.1f / H2D %.1f GB/s; tierpack "
              "warm-up %d steps, others %d; %d timed steps)\n" % (
                  model, base["median_step_s"] * 1e3, base["peak_bytes"] / GiB, ctx / GiB, base["pinned_d2h_Bps"] / 1e9,
                  base["pinned_h2d_Bps"] / 1e9, a.tierpack_warmup, a.warmup, a.steps))
        print("\n".join(lines + [""] + step_notes(rows)), flush=True)
        if a.json:
            with open(a.json, "w") as f:
                json.dump({"rows": all_rows, "results": results, "argv": sys.argv}, f, indent=1)
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"rows": all_rows, "results": results, "argv": sys.argv}, f, indent=1)


if __name__ == "__main__":
    main()
