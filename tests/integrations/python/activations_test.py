"""python/tierpack/activations.py under real autograd (LibTorch on the CPU).

The offloader's bookkeeping (record, plan, copies out, releases under pressure, copies back ahead of
backward, late fetches, divergence, shared saved tensors) runs exactly as on a GPU; a test transport
copies CPU tensors (the copies are real, so a wrong tensor handed back changes the gradients) and
completes them only after a few polls, so the waiting paths run too. Every test compares losses and
gradients with a run without hooks, bit for bit.

Run: /usr/bin/python3 tests/integrations/python/activations_test.py
"""
import contextlib
import gc
import os
import sys
import unittest
import weakref

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "python"))

import torch  # noqa: E402
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402

from tierpack.activations import ActivationOffloader  # noqa: E402


class _Event:
    def __init__(self, polls):
        self.polls_left = polls
        self.used = False


class SlowTransport:
    """Copies at once (fresh storage), reports the copy done only after `lag` polls or a wait."""

    def __init__(self, lag=2):
        self.lag = lag
        self.waits = 0
        self.uses = 0
        self.sent = 0
        self.check = None  # called with every tensor copied out, when it is copied

    def to_host(self, t):
        self.sent += 1
        if self.check:
            self.check(t)
        return t.detach().clone(), _Event(self.lag)

    def to_device(self, host, after=None):
        # A copy back is ordered after its copy out (CudaTransport waits for that event on the GPU).
        assert isinstance(after, _Event), "to_device needs the copy out's event"
        return host.clone(), _Event(self.lag)

    @staticmethod
    def done(ev):
        ev.polls_left -= 1
        return ev.polls_left < 0

    def wait(self, ev):
        self.waits += 1
        ev.polls_left = -1

    def use(self, ev):
        self.uses += 1
        ev.used = True


class Block(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.ln = nn.LayerNorm(d)
        self.fc = nn.Linear(d, 4 * d)
        self.fc2 = nn.Linear(4 * d, d)

    def forward(self, x):
        return x + self.fc2(F.gelu(self.fc(self.ln(x)), approximate="tanh"))


def make_model(d=64, layers=4, norm=True):
    torch.manual_seed(0)
    if not norm:  # CPU autocast of LibTorch 1.13 has no bfloat16 layer_norm
        return nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d), nn.Tanh(), nn.Linear(d, 10))
    return nn.Sequential(nn.Linear(d, d), *[Block(d) for _ in range(layers)], nn.Linear(d, 10))


def batches(n, rows=256, d=64):
    g = torch.Generator().manual_seed(7)
    return [(torch.randn(rows, d, generator=g), torch.randint(0, 10, (rows,), generator=g)) for _ in range(n)]


def train(iterations, offloader=None, micro=1, data=None, retain=False, autocast=False, on_model=None):
    """Losses and final gradients; `offloader` hooks every iteration's forward passes."""
    model = make_model(norm=not autocast)
    if on_model:
        on_model(model)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    data = data or batches(iterations * micro)
    losses = []
    for it in range(iterations):
        opt.zero_grad(set_to_none=True)
        for m in range(micro):
            x, y = data[it * micro + m]
            ctx = torch.autograd.graph.saved_tensors_hooks(offloader.pack, offloader.unpack) if offloader else None
            if ctx:
                ctx.__enter__()
            try:
                with torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast):
                    loss = F.cross_entropy(model(x).float(), y)
            finally:
                if ctx:
                    ctx.__exit__(None, None, None)
            if retain:
                loss.backward(retain_graph=True)
                opt.zero_grad(set_to_none=True)
            loss.backward()
            losses.append(loss.item())
        opt.step()
        if offloader:
            offloader.iteration_end(opt)
    return losses, [p.grad.clone() for p in model.parameters()], model


@contextlib.contextmanager
def collector_off():
    """Python's cycle collector stopped: what is still referenced in a cycle stays alive meanwhile."""
    gc.collect()
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


def offloader(live, peak=1 << 40, limit=1 << 20, record=2, transport=None, **kw):
    peak_fn = peak if callable(peak) else (lambda: peak)
    return ActivationOffloader(torch, lambda device: transport or SlowTransport(), live_bytes=lambda d: live(),
                               peak_bytes=lambda d: peak_fn(), limit_bytes=lambda d: limit, record_iteration=record,
                               device_type="cpu", min_bytes=16 << 10, log=lambda m: None, **kw)


class ActivationOffloadTest(unittest.TestCase):
    def assert_same_training(self, a, b):
        self.assertEqual(a[0], b[0])
        for ga, gb in zip(a[1], b[1]):
            self.assertTrue(torch.equal(ga, gb))

    def test_under_pressure_every_chosen_tensor_leaves_and_comes_back_with_the_same_values(self):
        plain = train(5)
        off = offloader(live=lambda: 1 << 40)  # always over the limit: every copied tensor is let go
        hooked = train(5, off)
        self.assert_same_training(plain, hooked)
        self.assertIsNotNone(off.plan_summary)
        self.assertEqual(off.plan_summary["iteration"], 2)
        self.assertGreater(off.plan_summary["chosen"], 0)
        self.assertEqual(len(off.history), 3)  # iterations 3-5
        for c in off.history:
            self.assertGreater(c["to_host_bytes"], 0)
            self.assertEqual(c["released_bytes"], c["to_host_bytes"])
            self.assertEqual(c["to_device_bytes"], c["released_bytes"])  # each came back once
            self.assertEqual(c["kept_on_device_bytes"], 0)
            self.assertEqual(c["divergences"], 0)

    def test_without_pressure_nothing_is_let_go_and_nothing_copied_back(self):
        plain = train(4)
        off = offloader(live=lambda: 0)
        hooked = train(4, off)
        self.assert_same_training(plain, hooked)
        for c in off.history:
            self.assertEqual(c["released_bytes"], 0)
            self.assertEqual(c["to_device_bytes"], 0)
            self.assertEqual(c["kept_on_device_bytes"], c["to_host_bytes"])

    def test_copies_back_run_ahead_once_there_is_room_and_late_ones_are_counted(self):
        # Pressure in forward (every copy is let go), room in backward: copies back run ahead of use.
        state = {"backward": False}
        off = offloader(live=lambda: 0 if state["backward"] else 1 << 40)
        orig_unpack = off.unpack

        def unpack(x):
            state["backward"] = True
            return orig_unpack(x)

        off.unpack = unpack
        plain = train(4)
        model = make_model()
        opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
        losses = []
        for it, (x, y) in enumerate(batches(4)):
            opt.zero_grad(set_to_none=True)
            state["backward"] = False
            with torch.autograd.graph.saved_tensors_hooks(off.pack, off.unpack):
                loss = F.cross_entropy(model(x), y)
            loss.backward()
            losses.append(loss.item())
            opt.step()
            off.iteration_end()
        self.assertEqual(plain[0], losses)
        for g, p in zip(plain[1], model.parameters()):
            self.assertTrue(torch.equal(g, p.grad))
        for c in off.history:
            self.assertGreater(c["to_device_bytes"], 0)
            self.assertEqual(c["fetched_late"], 0)  # all were copied back before they were asked for

    def test_with_no_room_in_backward_every_copy_back_is_late_and_still_correct(self):
        plain = train(4)
        off = offloader(live=lambda: 1 << 40)
        hooked = train(4, off)
        self.assert_same_training(plain, hooked)
        for c in off.history:
            self.assertEqual(c["fetched_late"], c["offloaded"])

    def test_the_peak_decides_how_much_is_chosen_earliest_first(self):
        small = offloader(live=lambda: 1 << 40, peak=(1 << 20) + 300_000)  # 300 kB over the limit
        train(3, small)
        big = offloader(live=lambda: 1 << 40, peak=1 << 40)
        train(3, big)
        s, b = small.plan_summary, big.plan_summary
        self.assertGreaterEqual(s["chosen_bytes"], 300_000)
        self.assertLess(s["chosen_bytes"], b["chosen_bytes"])
        self.assertEqual(b["chosen_bytes"], b["saved_bytes"])
        chosen = [i for i, p in enumerate(small._plan) if p > 0]
        self.assertEqual(chosen, list(range(len(chosen))))  # a prefix of the pack order
        fits = offloader(live=lambda: 1 << 40, peak=1 << 19)
        plain = train(3)
        self.assert_same_training(plain, train(3, fits))
        self.assertEqual(fits.plan_summary["chosen"], 0)
        self.assertIsNone(fits._plan)  # the hooks step aside

    def test_the_optimizers_parameters_are_never_chosen(self):
        # PyTorch 2 hands pack hooks detached aliases: a parameter is known by its storage only.
        off = offloader(live=lambda: 1 << 40, record=2)
        model = make_model()
        opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
        off.iteration_end(opt)  # iteration 1 ends: the parameters are known from now on
        big = [p for p in model.parameters() if p.numel() * p.element_size() >= off.min_bytes]
        self.assertTrue(big)
        for p in big:
            self.assertIs(off.pack(p.detach()).__class__, torch.Tensor)
            self.assertIs(off.pack(p.detach().t()).__class__, torch.Tensor)
        self.assertEqual(off._record, [], "a parameter was recorded as a candidate")
        act = torch.randn(256, 64) @ torch.randn(64, 64)
        off.pack(act)
        self.assertEqual(len(off._record), 1)

    def test_nothing_the_hooks_keep_leads_back_to_the_graph(self):
        # A forward whose graph is dropped without a backward (an evaluation under grad mode): with the
        # collector off, every record of a copied-out tensor dies with the graph (no reference cycle).
        off = offloader(live=lambda: 0, record=1)  # nothing let go: records hold the tensors themselves
        # Records iteration 1. The same model, kept alive, runs the forward below: the offloader knows
        # parameters by their storage address, so a new model's tensors could land on the freed
        # parameters' addresses and be taken for parameters (CI saw nothing copied out once).
        _, _, model = train(1, off)
        x, y = batches(1)[0]
        with collector_off():
            with torch.autograd.graph.saved_tensors_hooks(off.pack, off.unpack):
                out = model[1:](torch.tanh(model[0](x)))  # tanh saves its own output (64 KiB)
                loss = F.cross_entropy(out, y)
            refs = [weakref.ref(h) for h in off._offloaded]
            self.assertTrue(refs)
            del out, loss
            off.iteration_end()
            self.assertEqual([r for r in refs if r() is not None], [])

    def test_a_peak_after_the_last_saved_tensor_is_covered_by_releases_before_it(self):
        # The live peak comes in the loss, after the last saved tensor and before backward (as in a
        # language model's logits): the releases at the last saved tensor must already cover it.
        state = {"peak": 100}
        off = ActivationOffloader(torch, lambda d: SlowTransport(), live_bytes=lambda d: 100,
                                  peak_bytes=lambda d: state["peak"], limit_bytes=lambda d: 150, record_iteration=2,
                                  device_type="cpu", min_bytes=16 << 10, log=lambda m: None)
        model = make_model()
        opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
        for x, y in batches(4):
            state["peak"] = 100
            opt.zero_grad(set_to_none=True)
            with torch.autograd.graph.saved_tensors_hooks(off.pack, off.unpack):
                out = model(x)
            state["peak"] = 1 << 30  # the loss
            F.cross_entropy(out, y).backward()
            opt.step()
            off.iteration_end(opt)
        for c in off.history:
            self.assertGreater(c["to_host_bytes"], 0)
            self.assertEqual(c["released_bytes"], c["to_host_bytes"])

    def test_a_copy_that_fails_keeps_the_tensor_and_training_goes_on(self):
        class Failing(SlowTransport):
            def to_host(self, t):
                self.sent += 1
                if self.sent % 3 == 0:
                    raise RuntimeError("no pinned memory left")
                return super().to_host(t)

        logs = []
        off = ActivationOffloader(torch, lambda d: Failing(), live_bytes=lambda d: 1 << 40, peak_bytes=lambda d: 1 << 40,
                                  limit_bytes=lambda d: 1 << 20, record_iteration=2, device_type="cpu",
                                  min_bytes=16 << 10, log=logs.append)
        plain = train(4)
        self.assert_same_training(plain, train(4, off))
        self.assertTrue(all(c["failures"] > 0 for c in off.history))
        self.assertEqual(sum("could not copy" in m for m in logs), 1)

    def test_idle_hooks_keep_nothing_that_leads_back_to_the_graph(self):
        # Before the recorded iteration the hooks only hand tensors back; an op's own output must still
        # not hold its graph (tanh saves its output): with the collector off it dies with its graph.
        off = offloader(live=lambda: 0, record=2)
        model = make_model()
        x, _ = batches(1)[0]
        with collector_off():
            with torch.autograd.graph.saved_tensors_hooks(off.pack, off.unpack):
                h = torch.tanh(model[0](x))
                loss = h.sum()
            ref = weakref.ref(h)
            del h, loss
            self.assertIsNone(ref())

    def test_a_different_iteration_stops_offloading_for_that_iteration_only(self):
        data = batches(5)
        x, y = data[3]
        data[3] = (x[:200], y[:200])  # iteration 4 saves tensors of other sizes
        plain = train(5, data=list(data))
        off = offloader(live=lambda: 1 << 40)
        hooked = train(5, off, data=list(data))
        self.assert_same_training(plain, hooked)
        self.assertEqual([c["divergences"] for c in off.history], [0, 1, 0])
        self.assertGreater(off.history[2]["to_host_bytes"], 0)

    def test_gradient_accumulation_and_retained_graphs(self):
        plain = train(4, micro=2)
        off = offloader(live=lambda: 1 << 40)
        self.assert_same_training(plain, train(4, off, micro=2))
        plain = train(4, retain=True)
        off = offloader(live=lambda: 1 << 40)
        self.assert_same_training(plain, train(4, off, retain=True))

    def test_a_tensor_saved_twice_is_copied_once(self):
        class Twice(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = nn.Linear(16, 64)

            def forward(self, x):
                h = self.fc(x)
                return (h * h).sum() + (h.sin() * 2).sum()  # mul saves h twice, sin saves h again

        torch.manual_seed(0)
        m = Twice()
        x = torch.randn(200, 16)  # under min_bytes: only h is a candidate
        off = offloader(live=lambda: 1 << 40)
        grads = []
        for it in range(3):
            m.zero_grad(set_to_none=True)
            with torch.autograd.graph.saved_tensors_hooks(off.pack, off.unpack):
                loss = m(x)
            loss.backward()
            grads.append(m.fc.weight.grad.clone())
            off.iteration_end()
        torch.manual_seed(0)
        ref = Twice()
        ref(x).backward()
        self.assertTrue(torch.equal(grads[-1], ref.fc.weight.grad))
        c = off.history[-1]
        self.assertEqual(c["offloaded"], 1)  # h: once, though saved three times
        self.assertEqual(c["to_host_bytes"], 200 * 64 * 4)


if __name__ == "__main__":
    unittest.main(verbosity=2)
