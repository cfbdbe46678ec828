#!/usr/bin/env python3
"""bench/gpu/transfer_bound.py (Note [Transfer bound]) and the columns it adds to gpt2_bench.py's table."""

import os
import sys
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "bench", "gpu"))
import gpt2_bench  # noqa: E402  (imports torch only in its child processes)
from transfer_bound import transfer_bound  # noqa: E402

GB = 1e9
GiB = float(1 << 30)


def bound(step, opt, points, ctx, budget, bw=55 * GB):
    return transfer_bound(step, opt, points, ctx, budget, bw)


class TransferBoundTest(unittest.TestCase):
    def test_a_budget_that_holds_the_live_bytes_costs_nothing(self):
        self.assertEqual(bound(0.146, 0.017, [(0.045, 20 * GB)], 0.7 * GB, 20.7 * GB), (0.146, None))

    def test_bytes_that_fit_in_the_window_before_their_moment_cost_nothing(self):
        # 2.75 GB over the budget cross in 50 ms at 55 GB/s: exactly the optimizer's 5 ms and the 45 ms before t.
        b, _ = bound(0.146, 0.005, [(0.045, 20 * GB)], 0, 17.25 * GB)
        self.assertAlmostEqual(b, 0.146, places=9)

    def test_every_byte_beyond_the_window_adds_its_link_time(self):
        b1, at = bound(0.146, 0.010, [(0.045, 20 * GB)], 0.5 * GB, 10 * GB)
        b2, _ = bound(0.146, 0.010, [(0.045, 20 * GB)], 0.5 * GB, 9 * GB)
        self.assertEqual(at, 0)
        self.assertAlmostEqual(b1, 0.146 + 10.5 / 55 - 0.055, places=9)
        self.assertAlmostEqual(b2 - b1, 1 / 55, places=9)

    def test_the_point_that_leaves_the_least_time_sets_the_bound(self):
        # A lower live count early can bind harder than the peak later: 5 GB over at 20 ms (81 ms needed, 30 ms
        # of window) against 7 GB over at 100 ms (127 ms needed, 110 ms of window).
        pts = [(0.020, 15 * GB), (0.100, 17 * GB), (0.130, 12 * GB)]
        b, at = bound(0.146, 0.010, pts, 0, 10 * GB)
        self.assertEqual(at, 0)
        self.assertAlmostEqual(b, 0.146 + 5 / 55 - 0.030, places=9)

    def test_bad_inputs_are_errors(self):
        with self.assertRaisesRegex(ValueError, "d2h_Bps"):
            bound(0.1, 0.01, [(0.01, GB)], 0, GB, bw=0)
        with self.assertRaisesRegex(ValueError, "point 1"):
            bound(0.1, 0.01, [(0.01, GB), (0.02, -1)], 0, GB)
        with self.assertRaisesRegex(ValueError, "exceed the step"):
            bound(0.1, 0.03, [(0.08, GB)], 0, GB)
        with self.assertRaisesRegex(ValueError, "no points"):
            bound(0.1, 0.03, [], 0, GB)


def result(mode, step, peak, budget=None, pct=None, phases=(0.045, 0.090, 0.010)):
    r = {"mode": mode, "median_step_s": step, "tokens_per_s": 8192 / step, "peak_bytes": peak,
         "losses": [10.0, 9.0], "phase_s": dict(zip(("forward", "backward", "optimizer"), phases))}
    if budget is not None:
        r.update(budget=budget, pct=pct, tierpack={"to_host_bytes_per_step": 5 * GB, "to_device_bytes_per_step": 5 * GB,
                                                   "stalls_per_step": 0.0})
    return r


class TableTest(unittest.TestCase):
    def rows(self, table):
        main = table.split("\n\n")[0]  # the phase table follows a blank line
        return {line.split("|")[1].strip(): [c.strip() for c in line.split("|")[1:-1]]
                for line in main.splitlines() if line.startswith("| ") and "|---" not in line}

    def test_the_table_shows_the_bound_at_each_budget_and_at_each_other_modes_peak(self):
        base = result("default", 0.146, 29.9 * GiB)
        marks = [{"name": "forward block 0", "t_s": 0.002, "peak_live_bytes": 19 * GiB},
                 {"name": "loss", "t_s": 0.045, "peak_live_bytes": 24.4 * GiB},
                 {"name": "backward head", "t_s": 0.050, "peak_live_bytes": 27.6 * GiB},
                 {"name": "backward end", "t_s": 0.127, "peak_live_bytes": 21 * GiB}]
        base.update(pinned_h2d_Bps=55 * GB, pinned_d2h_Bps=55 * GB, marks=marks)
        pts = [(m["t_s"], m["peak_live_bytes"]) for m in marks]
        ctx = 0.67 * GiB
        results = [base, result("save_on_cpu", 0.913, 21.1 * GiB),
                   result("tierpack", 0.580, 22.5 * GiB, budget=22.4 * GiB, pct=75.0)]
        table = gpt2_bench.render(results, base, ctx)
        hdr = [c.strip() for c in table.splitlines()[0].split("|")[1:-1]]
        rows = self.rows(table)
        at = lambda label, col: rows[label][hdr.index(col)]
        # Expected values worked out by hand (issue 26: they came from transfer_bound() itself), per point:
        # over = live + 0.67 GiB context - budget, cost = over / 55 GB/s - (10 ms optimizer + t).
        # 75% (22.4 GiB): loss 24.4 -> 2.67 GiB = 52.1 ms < 55 ms, nothing; backward head 27.6 -> 5.87 GiB =
        # 114.6 ms - 60 ms = 54.6 ms; backward end 21 -> under. Bound 146 + 54.6 = 200.6 ms.
        self.assertEqual(at("tierpack 75%", "bound ms"), "201")
        self.assertEqual(transfer_bound(0.146, 0.010, pts, ctx, 22.4 * GiB, 55 * GB)[1], 2)  # set at backward head
        # floor = max(146 ms, (29.9 - 22.4) GiB / 55 GB/s = 146.4 ms); 146.4 / 200.6 = 0.730.
        self.assertEqual(at("tierpack 75%", "floor/bound"), "0.73")
        # save_on_cpu's peak (21.1 GiB): loss 3.97 GiB = 77.5 - 55 = 22.5 ms; backward head 7.17 GiB = 140.0 - 60
        # = 80.0 ms; backward end 0.57 GiB = 11.1 ms < 137 ms. Bound 146 + 80.0 = 226.0 ms.
        self.assertEqual(at("save_on_cpu", "bound ms"), "226")
        self.assertEqual(at("default", "bound ms"), "146")
        self.assertIn("| tierpack 75% | 45 | 90 | 10 |", table)
        self.assertIn("Live peak 27.60 GiB before 'backward head' (50 ms); the bound was set at: backward head", table)

    def test_a_baseline_without_the_probes_leaves_the_bound_out(self):
        base = result("default", 0.146, 29.9 * GiB)
        base.update(pinned_h2d_Bps=55 * GB, pinned_d2h_Bps=55 * GB)  # no marks: a baseline from before them
        table = gpt2_bench.render([base, result("tierpack", 0.58, 22.5 * GiB, budget=22.4 * GiB, pct=75.0)], base, 0.67 * GiB)
        hdr = [c.strip() for c in table.splitlines()[0].split("|")[1:-1]]
        self.assertEqual(self.rows(table)["tierpack 75%"][hdr.index("bound ms")], "-")
        self.assertNotIn("bound = default step", table)


class FairnessTest(unittest.TestCase):
    """Issue 26 (bench fairness, results vs logs): no constant stands in for a missing measurement, every step of a
    run is compared with the default's or the table says which were not, and the warm-ups are printed."""

    def test_a_default_run_without_pinned_bandwidth_fails_loudly(self):
        base = result("default", 0.146, 29.9 * GiB)
        with self.assertRaisesRegex(SystemExit, "pinned_h2d_Bps, pinned_d2h_Bps"):
            gpt2_bench.render([base], base, 0.67 * GiB)

    def test_uncompared_steps_and_warm_ups_are_in_the_table(self):
        base = result("default", 0.146, 29.9 * GiB)
        base.update(pinned_h2d_Bps=55 * GB, pinned_d2h_Bps=55 * GB, warmup_step_s=[0.2] * 3, losses=[10.0] * 53)
        tp = result("tierpack", 0.58, 22.5 * GiB, budget=22.4 * GiB, pct=75.0)
        tp.update(warmup_step_s=[0.3] * 5, losses=[10.0] * 55)
        table = gpt2_bench.render([base, tp], base, 0.67 * GiB)
        self.assertIn("losses compared at steps 0-52 of 55 (last 2 uncompared); phase None", table)
        self.assertIn("warm-up steps before the timed ones: default 3, tierpack 5", table)
        self.assertIn("per-block timing hooks", table)
        # The same number of steps: nothing to say.
        tp["losses"] = [10.0] * 53
        self.assertNotIn("uncompared", gpt2_bench.render([base, tp], base, 0.67 * GiB))

    def test_a_failed_context_measurement_is_an_error(self):
        class A:
            pass
        orig = gpt2_bench.subprocess.run
        gpt2_bench.subprocess.run = lambda *a, **k: type("P", (), {"stdout": "", "stderr": "no CUDA device", "returncode": 1})()
        try:
            with self.assertRaisesRegex(SystemExit, "measuring the CUDA context failed .*no CUDA device"):
                gpt2_bench.measure_context(A())
        finally:
            gpt2_bench.subprocess.run = orig


if __name__ == "__main__":
    unittest.main()
