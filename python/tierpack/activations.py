"""Saved activations leave the GPU through autograd's saved-tensor hooks and come back ahead of use.

Installed by ``tierpack.cuda.install()`` when TIERPACK_GPU has ``activations:offload`` (experimental:
on GPT-2 large it is slower than the page groups; see "Measured" below). Page groups do not move then
(``activations:offload`` implies ``migrate:off``): what the hooks leave over the budget spills.

Note [Activation offload]
~~~~~~~~~~~~~~~~~~~~~~~~~
Moving page groups costs driver remaps on top of the copies: on the H200 a remap waits for the copy
running on the copy engines and costs ~12.7 ms per GiB even idle, and compute waits behind every remap
gate (bench/results/gpu-h200-2026-11-30, sections 1-3). Most bytes a budget forces off the GPU are
activations saved for backward, and autograd hands every one of them to a pack hook and asks for it
back through an unpack hook: the tensor may come back at another address. So they need no remap:

* record: in the last warm-up iteration (the optimizer's state exists by then) the hooks only note
  each saved tensor's size in pack order, and live bytes along the way (the runtime's counters);
* plan: the bytes over ``fill * budget`` at that iteration's live peak must be off the GPU then. The
  earliest saved tensors are used last in backward, so they are chosen first, until 1.25x those bytes
  (a chosen tensor is let go only when needed: extra ones cost only forward link time);
* forward: a chosen tensor is copied to pinned host memory on a copy stream ordered after the compute
  stream (the copies queue up, compute does not wait). The hook keeps the GPU tensor alive until it
  must let go: whenever live bytes would exceed the limit, the oldest copy is waited for and its GPU
  tensor dropped (PyTorch frees it on the compute stream once nothing else holds it);
* backward: a tensor never dropped is handed back as it is; a dropped one is copied back on a second
  stream, newest first, as soon as live bytes leave room for it; the compute stream waits for its
  copy's event only when it needs it. A tensor asked for before its copy began is fetched at once
  (counted as late, never wrong data);
* "live bytes" in both rules are the recorded iteration's at the same saved tensor (forward: the most
  until the next saved tensor, or until backward starts after the last one, from the iteration's peak
  counter: a language model's peak comes after the last saved tensor, in the loss) or unpack call
  (backward), less the bytes away at that moment. Not the allocator's counter now: it counts rounded
  blocks whose sizes depend on timing (a block freed on another stream is reused only once its event
  passed), and with it the runtime's trace diverged three iterations in a row on the H200. So releases
  and copies back happen at the same points of every iteration, which allocates in the same order.

What is never moved: tensors under ``min_bytes`` (1 MiB) and the optimizer's parameters (known by their
storage from the optimizer-step hook: they outlive the iteration, so copying them out frees nothing).
Autocast's casts of parameters are moved (only the saved copies hold them once autocast exits). The
hooks keep detached aliases only: an op's saved output holding its own graph would be a reference cycle,
freed only by Python's collector when a graph is dropped without a backward. A saved tensor the hooks
cannot match to the recorded order (another size at that position) ends offloading for the rest of that
iteration (counted as a divergence); one that cannot be copied out (no pinned memory left) stays on the
GPU (counted as a failure, said once). Only tensors saved on the thread that installed the hooks are seen
(autograd's default hooks are per thread).

Pinned buffers come from a pool kept by size (CudaTransport, tierpack/copy_streams.py): asking PyTorch's pinned allocator for
each copy out made copying every activation of GPT-2 large out 2x slower (bench/gpu/hooks_bench.py).
The transport is a parameter, so the same bookkeeping runs on CPU tensors in tests.

Measured (H200, GPT-2 large, bench/results/gpu-h200-2026-11-30-2): the live peak falls ~3.4 GiB less
than the bytes let go (tensors let go while something else still holds their storage: views of one
buffer, casts in autocast's cache while the loss runs inside autocast); copies back wait for the
compute already queued (the destination block is allocated on the compute stream), so backward waits
for most of them. Under tierpack's budget the shortfall spills chunks, and 75% / 60% ran at 1019 /
1306 ms per step against 526 / 740 with page groups.

Tried since (bench/results/gpu-h200-2026-11-30-4, PyTorch's allocator): copies back allocated on the copy
stream (Note [Copies back] in copy_streams.py) were no faster and raised the reserved peak by 3-8 GiB. What
frees nothing when let go (counter ``freed_bytes``; ``hooks_bench.py --probe``): at 12 GiB under the peak,
1.66 of the 12.06 GB let go per step, 0.80 of it autocast's cached bf16 casts of the parameters (held by
autocast's cache until it exits after the loss). The bound on this path is the copies out: at that limit
every saved tensor is chosen (1.25 x the need exceeds the 17.6 GB saved), and copying 17.6 GB out alone
takes a step from 146 to ~350 ms. Left: choose only what frees memory (skip what freed nothing in the first
offloading iteration), so fewer bytes go out; let the remap gate wait for the hooks' streams so both movers
can run.
"""

from __future__ import annotations

import sys
import threading
import time

MiB = 1 << 20


def _storage_ptr(t):
    """Where a tensor's storage starts (its views and aliases share it)."""
    return t.untyped_storage().data_ptr() if hasattr(t, "untyped_storage") else t.storage().data_ptr()


class _Saved:
    """What the pack hook returns for a tensor it copies out."""

    __slots__ = ("index", "nbytes", "key", "gpu", "host", "d2h", "fetched", "h2d", "refs", "__weakref__")

    def __init__(self, index, nbytes, key, gpu, host, d2h):
        self.index, self.nbytes, self.key = index, nbytes, key
        self.gpu, self.host, self.d2h = gpu, host, d2h  # gpu: None once dropped
        self.fetched = self.h2d = None                   # the copy back and its event
        self.refs = 1                                    # packs handed this object, not yet unpacked


class _Counters:
    FIELDS = ("saved", "saved_bytes", "offloaded", "to_host_bytes", "released_bytes", "freed_bytes", "release_wait_ms",
              "to_device_bytes", "kept_on_device_bytes", "stalls", "fetched_late", "divergences", "failures")

    def __init__(self):
        for f in self.FIELDS:
            setattr(self, f, 0)

    def as_dict(self):
        return {f: getattr(self, f) for f in self.FIELDS}


class ActivationOffloader:
    """The pack/unpack hooks and their plan (Note [Activation offload]).

    The offloader serves the device of the first saved tensor of type `device_type` it sees (one device
    per process, as with one GPU per rank); tensors on other devices stay put. For that device:
    transport(device) makes the copier (CudaTransport, or a test double with its methods);
    live_bytes(device) / peak_bytes(device): the allocator's live bytes now / its live peak this
    iteration; limit_bytes(device): live bytes to stay under (read when the plan is made);
    record_iteration: the iteration (1-based) that is recorded; offloading starts after it.
    """

    def __init__(self, torch, transport, live_bytes, peak_bytes, limit_bytes, record_iteration, device_type="cuda",
                 min_bytes=MiB, select_factor=1.25, max_ahead=8 << 30, fits=None, log=None):
        self.torch = torch
        self._make_transport = transport
        self._live_bytes = live_bytes
        self._peak_bytes = peak_bytes
        self._limit_bytes = limit_bytes
        self.transport = None
        self.device = None
        self.limit = 0
        self._fits = fits              # fits(device): live peak under which nothing leaves (default: limit)
        self.record_iteration = max(1, int(record_iteration))
        self.device_type = device_type
        self.min_bytes = min_bytes
        self.select_factor = select_factor
        self.max_ahead = max_ahead
        self.log = log or (lambda msg: sys.stderr.write("tierpack: " + msg + "\n"))
        self._lock = threading.RLock()
        self._parameters = set()
        self._failure_logged = False
        self.iteration = 1
        self._record = None            # [(nbytes, first index of the same tensor or -1)]
        self._plan = None              # per pack index: nbytes if chosen, 0 if kept, -(j+1) if same as j
        self.plan_summary = None
        self.recorded = None           # the recorded iteration's (nbytes, first) list, kept for inspection
        self.history = []              # per-iteration counters (offloading iterations)
        self.on_release = None         # on_release(_Saved, bytes freed): a probe (bench/gpu/hooks_bench.py)
        self._begin_iteration()

    def live_bytes(self):
        return self._live_bytes(self.device)

    # -------------------------------------------------------------------------------- iterations
    def _begin_iteration(self):
        self._index = 0
        self._keys = {}                # key -> index of a pack seen (recording) or a pending _Saved
        self._offloaded = []           # _Saved in pack order
        self._pending = []             # _Saved whose GPU tensor is still held, oldest first
        self._cursor = None            # backward: next _Saved (from the end) to copy back
        self._ahead = 0                # bytes copied back and not yet handed out
        self._absent = 0               # bytes let go and not copied back yet
        self._unpacks = 0              # unpack calls so far
        self._diverged = False
        self.counters = _Counters()
        if self.iteration == self.record_iteration:
            self._record = []
            self._samples = []         # (live bytes, peak so far) at each saved tensor of the recorded iteration
            self._live_bwd = []        # live bytes at each unpack call
            self._peak_at_backward = None

    def iteration_end(self, optimizer=None):
        """Called at the end of every iteration (optimizer step), before the runtime resets its peak."""
        with self._lock:
            if optimizer is not None:
                self.note_parameters(p for g in optimizer.param_groups for p in g["params"])
            if self._record is not None and self.iteration == self.record_iteration and self.device is not None:
                self.limit = int(self._limit_bytes(self.device))
                self._make_plan(self._peak_bytes(self.device))
            elif self._plan is not None:
                for h in self._pending:
                    h.gpu = None
                self.history.append(self.counters.as_dict())
            self._record = None
            self.iteration += 1
            self._begin_iteration()

    def _windows(self):
        """Per saved tensor of the recorded iteration: the most live bytes until the next one (the last:
        until backward starts), the bytes a release at that tensor must cover. Between two samples the
        most is exact when the iteration's peak rose there (the new peak), else the larger sample."""
        smp = self._samples
        out = []
        for i, (live, peak) in enumerate(smp):
            if i + 1 < len(smp):
                nlive, npeak = smp[i + 1]
            else:
                nlive = self._live_bwd[0] if self._live_bwd else live
                npeak = self._peak_at_backward if self._peak_at_backward is not None else peak
            out.append(max(live, nlive, npeak if npeak > peak else 0))
        return out

    def _make_plan(self, peak):
        self._live_fwd = self._windows()
        rec = self.recorded = self._record
        if self.limit <= 0:
            self.log("activations: no budget for this device: none leave the GPU")
            return
        need = peak - self.limit
        if self._fits is not None and peak <= self._fits(self.device):
            need = 0  # the page groups' allocator holds this peak under the budget by itself
        chosen, total = 0, sum(n for n, first in rec if first < 0)
        plan = [0] * len(rec)
        if need > 0:
            goal = need * self.select_factor
            for i, (n, first) in enumerate(rec):
                if first >= 0:
                    plan[i] = -(first + 1) if plan[first] > 0 else 0
                elif chosen < goal:
                    plan[i] = n
                    chosen += n
        self._plan = plan if chosen > 0 else None  # nothing chosen: the hooks step aside
        self.plan_summary = {"iteration": self.iteration, "saved": len(rec), "saved_bytes": total, "peak": peak,
                             "limit": self.limit, "need": max(need, 0), "chosen_bytes": chosen,
                             "chosen": sum(1 for p in plan if p > 0)}
        gib = float(1 << 30)
        if need <= 0:
            self.log("activations: the live peak %.2f GiB fits the limit %.2f GiB: none leave the GPU" % (peak / gib, self.limit / gib))
        else:
            self.log("activations: %d of %d saved tensors (%.2f of %.2f GiB) may leave the GPU to bring the live peak "
                     "%.2f GiB under %.2f GiB%s" % (self.plan_summary["chosen"], len(rec), chosen / gib, total / gib,
                                                    peak / gib, self.limit / gib,
                                                    "" if chosen >= need else " (not enough: the rest stays over the limit)"))

    # -------------------------------------------------------------------------------------- pack
    def _eligible(self, t):
        if t.device.type != self.device_type or (self.device is not None and t.device != self.device):
            return False
        if t.numel() * t.element_size() < self.min_bytes or (t.is_leaf and t.requires_grad):
            return False
        return _storage_ptr(t) not in self._parameters

    def note_parameters(self, params):
        """The tensors that outlive every iteration (an optimizer's parameters): never copied out, since
        letting go of them frees nothing. Autograd hands the hooks detached aliases (PyTorch 2), so a
        parameter is known by its storage."""
        self._parameters = {_storage_ptr(p) for p in params if p.device.type == self.device_type}

    def pack(self, t):
        if t.grad_fn is not None:
            # An op's own output (PyTorch 2 detaches the others): what the hooks keep must not lead back
            # to the graph that keeps it (a reference cycle only Python's collector would free), also
            # while they are idle (before the recorded iteration, or when nothing was chosen).
            t = t.detach()
        if self._plan is None and self._record is None:
            return t
        if not self._eligible(t):
            return t
        with self._lock:
            i = self._index
            self._index += 1
            n = t.numel() * t.element_size()
            key = (t.data_ptr(), t.dtype, tuple(t.shape), tuple(t.stride()))
            c = self.counters
            c.saved += 1
            c.saved_bytes += n
            if self._record is not None:
                if self.device is None:
                    self.device = t.device
                    self.transport = self._make_transport(t.device)
                first = self._keys.get(key)
                if first is None:
                    self._keys[key] = i
                self._record.append((n, -1 if first is None else first))
                self._samples.append((self.live_bytes(), self._peak_bytes(self.device)))
                return t
            if self._diverged:
                return t
            plan = self._plan
            if i >= len(plan) or (plan[i] > 0 and plan[i] != n):
                self._diverge(i, n)
                return t
            p = plan[i]
            if p < 0:
                h = self._keys.get(key)
                if h is not None and h.index == -p - 1 and h.gpu is not None:
                    h.refs += 1
                    return h
                return t
            if p == 0:
                self._relieve(i)
                return t
            try:
                host, ev = self.transport.to_host(t)
            except Exception as e:  # noqa: BLE001 - e.g. no pinned memory left: keep it, keep training
                c.failures += 1
                if not self._failure_logged:
                    self._failure_logged = True
                    self.log("activations: could not copy a saved tensor out (%s): it stays on the GPU" % e)
                return t
            h = _Saved(i, n, key, t, host, ev)
            self._keys[key] = h
            self._offloaded.append(h)
            self._cursor = None  # a forward after a backward (gradient accumulation): scan again
            self._pending.append(h)
            c.offloaded += 1
            c.to_host_bytes += n
            self._relieve(i)
            return h

    def _diverge(self, i, n):
        self._diverged = True
        self.counters.divergences += 1
        if len(self.history) < 3 or self.counters.divergences == 1 and len(self.history) % 100 == 0:
            self.log("activations: saved tensor %d (%d bytes) does not match the recorded iteration: "
                     "nothing more leaves the GPU in iteration %d" % (i, n, self.iteration))

    def _relieve(self, i):
        """While live bytes would exceed the limit, let go of the oldest GPU tensors copied out.

        Live bytes are the recorded iteration's at this saved tensor less what was let go since: the
        allocator's own counter counts rounded blocks, which depend on timing (a block freed on another
        stream is reused only once its event passed), and releases must not."""
        rec = self._live_fwd
        live = rec[min(i, len(rec) - 1)] - self._absent if rec else 0
        while self._pending and live > self.limit:
            h = self._pending.pop(0)
            if h.gpu is None:
                continue  # already handed back by an earlier backward (gradient accumulation)
            if not self.transport.done(h.d2h):
                t0 = time.perf_counter()
                self.transport.wait(h.d2h)
                self.counters.release_wait_ms += (time.perf_counter() - t0) * 1e3
            if self._keys.get(h.key) is h:
                del self._keys[h.key]
            before = self.live_bytes()
            h.gpu = None
            freed = before - self.live_bytes()  # 0 while something else holds the storage
            self._absent += h.nbytes
            live -= h.nbytes
            self.counters.released_bytes += h.nbytes
            self.counters.freed_bytes += max(freed, 0)
            if self.on_release is not None:
                self.on_release(h, freed)

    # ------------------------------------------------------------------------------------ unpack
    def unpack(self, x):
        if not isinstance(x, _Saved):
            if self._record is not None:
                with self._lock:
                    if self._peak_at_backward is None and self.device is not None:
                        self._peak_at_backward = self._peak_bytes(self.device)
                    self._live_bwd.append(self.live_bytes())
            elif self._offloaded:
                with self._lock:
                    self._unpacks += 1
                    self._copy_back_ahead()
            return x
        with self._lock:
            self._unpacks += 1
            h = x
            if h.gpu is not None:
                self.counters.kept_on_device_bytes += h.nbytes if h.refs == 1 else 0
                out = h.gpu
                self._hand_out(h)
                self._copy_back_ahead()
                return out
            if h.fetched is None:
                self.counters.fetched_late += 1
                self._fetch(h)
            elif not self.transport.done(h.h2d):
                self.counters.stalls += 1
            self.transport.use(h.h2d)
            out = h.fetched
            self._hand_out(h)
            self._copy_back_ahead()
            return out

    def _hand_out(self, h):
        h.refs -= 1
        if h.refs <= 0:
            if h.fetched is not None:
                self._ahead -= h.nbytes
            h.fetched = None  # the caller holds it now; a later unpack (retain_graph) copies again
            h.gpu = None

    def _fetch(self, h):
        h.fetched, h.h2d = self.transport.to_device(h.host, h.d2h)
        self._ahead += h.nbytes
        self._absent -= h.nbytes
        self.counters.to_device_bytes += h.nbytes

    def _copy_back_ahead(self):
        """Copies back, newest first, what fits under the limit: live bytes are the recorded
        iteration's at this unpack call less what is still away (see _relieve)."""
        if self._cursor is None:
            self._cursor = len(self._offloaded) - 1
        rec = self._live_bwd
        if not rec:
            return
        live = rec[min(self._unpacks - 1, len(rec) - 1)] - self._absent
        while self._cursor >= 0:
            h = self._offloaded[self._cursor]
            if h.gpu is not None or h.fetched is not None or h.refs <= 0:
                self._cursor -= 1
                continue
            if self._ahead + h.nbytes > self.max_ahead or live + h.nbytes > self.limit:
                return
            self._fetch(h)
            live += h.nbytes
            self._cursor -= 1

    # ------------------------------------------------------------------------------------- install
    def install(self):
        """Makes pack/unpack autograd's default saved-tensor hooks on this thread (for good)."""
        self.torch._C._autograd._push_saved_tensors_default_hooks(self.pack, self.unpack)

    def stats(self):
        with self._lock:
            return {"plan": self.plan_summary, "iterations": list(self.history), "current": self.counters.as_dict()}
