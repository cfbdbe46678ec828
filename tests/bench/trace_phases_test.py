#!/usr/bin/env python3
"""bench/gpu/trace_phases.py (a profiled step by phase) and bench/gpu/latest_rows.py (gpu-latest.json's merge)."""

import gzip
import json
import os
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
GPU = os.path.join(HERE, "..", "..", "bench", "gpu")
sys.path.insert(0, GPU)
import latest_rows  # noqa: E402
import trace_phases  # noqa: E402

D2H, H2D = "Memcpy DtoH (Device -> Pinned)", "Memcpy HtoD (Pinned -> Device)"


class Trace:
    """A Chrome trace as torch.profiler writes it: host launches (cuda_runtime, with a correlation id and the
    launching thread) and the GPU work they queued (kernels and copies on streams)."""

    def __init__(self):
        self.events, self.corr = [], 0

    def gpu(self, tid, launch_us, start_us, dur_us, stream=7, name="kernel", cat="kernel", nbytes=0):
        self.corr += 1
        self.events.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "ts": launch_us, "dur": 1,
                            "tid": tid, "args": {"correlation": self.corr}})
        self.events.append({"ph": "X", "cat": cat, "name": name, "ts": start_us, "dur": dur_us,
                            "args": {"stream": stream, "correlation": self.corr, "bytes": nbytes}})

    def step(self, tid, ts, dur):
        self.events.append({"ph": "X", "cat": "user_annotation", "name": "Optimizer.step#AdamW.step", "ts": ts,
                            "dur": dur, "tid": tid})


def one_step():
    t = Trace()
    t.gpu(1, 0, 10, 1000)                                            # forward, main thread
    t.gpu(1, 20, 100, 500, stream=9, name=D2H, cat="gpu_memcpy", nbytes=25_000_000)  # out during forward
    t.gpu(1, 30, 3000, 1000)                                         # forward again after a 1.99 ms gap
    t.gpu(2, 4000, 4100, 2000)                                       # backward: autograd's thread
    t.gpu(2, 4200, 4200, 1000, stream=10, name=H2D, cat="gpu_memcpy", nbytes=50_000_000)
    t.step(1, 6500, 1000)
    t.gpu(1, 6600, 6600, 300)                                        # the optimizer step
    t.gpu(1, 6700, 6700, 200, stream=9, name=D2H, cat="gpu_memcpy", nbytes=10_000_000)
    t.gpu(1, 6700, 6650, 400, stream=10, name=H2D, cat="gpu_memcpy", nbytes=10_000_000)
    return t.events


class TracePhasesTest(unittest.TestCase):
    def test_each_phase_has_its_compute_copies_and_gaps(self):
        r = trace_phases.analyse(one_step())
        by = {p["phase"]: p for p in r["phases"]}
        self.assertEqual(set(by), {"forward", "backward", "optimizer"})
        f, b, o = by["forward"], by["backward"], by["optimizer"]
        self.assertAlmostEqual(f["compute_busy_ms"], 2.0)
        self.assertAlmostEqual(f["compute_idle_ms"], 1.99)
        self.assertAlmostEqual(f["d2h_gb"], 0.025)
        self.assertAlmostEqual(f["d2h_gbps"], 50.0)
        self.assertAlmostEqual(b["h2d_gbps"], 50.0)
        self.assertEqual((b["compute_kernels"], o["compute_kernels"]), (1, 1))
        self.assertAlmostEqual(o["d2h_gb"] + o["h2d_gb"], 0.02)
        self.assertAlmostEqual(r["both_ways_ms"], 0.2)  # the step's two copies overlap 6700-6900 us
        self.assertAlmostEqual(r["largest_gaps"][0]["gap_ms"], 1.99)
        self.assertEqual(r["largest_gaps"][0]["phase"], "forward")
        self.assertAlmostEqual(r["largest_gaps"][0]["d2h_busy_ms"], 0.0)

    def test_the_command_reads_gzip_and_says_what_it_cannot_read(self):
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "t.json.gz")
            with gzip.open(path, "wt") as f:
                json.dump({"traceEvents": one_step()}, f)
            p = subprocess.run([sys.executable, os.path.join(GPU, "trace_phases.py"), path], capture_output=True, text=True)
            self.assertEqual(p.returncode, 0, p.stderr)
            self.assertIn("| optimizer |", p.stdout)
            p = subprocess.run([sys.executable, os.path.join(GPU, "trace_phases.py"), os.path.join(d, "none.json")],
                               capture_output=True, text=True)
            self.assertNotEqual(p.returncode, 0)
            self.assertIn("cannot read", p.stderr)
            empty = os.path.join(d, "e.json")
            with open(empty, "w") as f:
                json.dump({"traceEvents": []}, f)
            p = subprocess.run([sys.executable, os.path.join(GPU, "trace_phases.py"), empty], capture_output=True, text=True)
            self.assertNotEqual(p.returncode, 0)
            self.assertIn("no GPU events", p.stderr)


def row(model, mode, gpu, step, **kw):
    return dict({"model": model, "mode": mode, "commit": "c", "gpu": gpu, "step_ms": step, "budget_pct": None,
                 "budget_of": None}, **kw)


class LatestRowsTest(unittest.TestCase):
    def test_a_cell_takes_the_newest_row_of_its_own_gpu_only(self):
        old = [row("gpt2", "ckpt", "H200", 200.0), row("gpt2", "tierpack", "H200", 300.0, budget_pct=60)]
        new = [row("gpt2", "ckpt", "H100", 230.0), row("gpt2", "ckpt", "H200", 205.0),
               row("gpt2", "tierpack", "H200", 310.0, budget_pct=60, gpu_options="limit:hard"),
               row("gpt2", "ckpt", "H200", None, failed=True)]
        rows, replaced, added, failed = latest_rows.merge(old, [("dir", "call1_rows.json", new)])
        self.assertEqual((replaced, added, failed), (1, 2, 1))
        steps = {(r["mode"], r["gpu"], r.get("gpu_options")): r["step_ms"] for r in rows}
        self.assertEqual(steps, {("ckpt", "H200", None): 205.0, ("ckpt", "H100", None): 230.0,
                                 ("tierpack", "H200", None): 300.0, ("tierpack", "H200", "limit:hard"): 310.0})
        self.assertTrue(all(r["results_dir"] == "dir" for r in rows if r["step_ms"] in (205.0, 230.0)))

    def test_a_row_without_its_gpu_is_refused_before_anything_is_written(self):
        with tempfile.TemporaryDirectory() as d:
            bad, latest = os.path.join(d, "call1_rows.json"), os.path.join(d, "latest.json")
            with open(bad, "w") as f:
                json.dump([{"model": "gpt2", "mode": "ckpt", "commit": "c"}], f)
            p = subprocess.run([sys.executable, os.path.join(GPU, "latest_rows.py"), bad, "--latest", latest],
                               capture_output=True, text=True)
            self.assertNotEqual(p.returncode, 0)
            self.assertIn("has no gpu", p.stderr)
            self.assertFalse(os.path.exists(latest))


if __name__ == "__main__":
    unittest.main()
