"""Copies of whole storages between a CUDA device and pooled pinned host memory, on two side streams.

The transport of the storage mover (tierpack/activations.py, Note [Storage moves]). Everything here is
stream-ordered; nothing waits on the host:

* ``to_host(flat)``: the copy out waits (on the GPU) for the compute queued so far, runs on the
  device-to-host stream into a pinned buffer, and records an event;
* ``to_device(host, nbytes, after)``: the destination is allocated on the compute stream (which frees it
  later), the host-to-device stream waits for the compute queued so far (that block may have been freed
  by work still running there: Note [Copies back]) and for the copy out `after`, copies, records an event;
* ``to_host_many(flats)`` / ``to_device_many(items)``: the copies of one call together, after one wait for the
  compute queued so far, with one event after them (Note [Batched moves] in activations.py);
* ``compute_wait(event)``: the compute stream waits for a copy on the GPU (a release, a use);
* pinned buffers are kept by size and reused once their last copy is over (asking PyTorch's pinned
  allocator, which rounds to powers of two, for every copy out made copying every activation of GPT-2
  large out 2x slower on the H200: bench/results/gpu-h200-2026-11-30-2).

Note [Copies back]
The copy back's destination is allocated on the compute stream, so the copy first waits for the compute
queued at its fetch; the plan fetches early enough for that (Note [Storage move plan] in placer/). Allocating
it on the copy stream instead, with record_stream for the compute stream, was no faster on GPT-2 large and
raised PyTorch's reserved peak by 3-8 GiB: the copy stream's blocks form a second pool
(bench/results/gpu-h200-2026-11-30-4).
"""

from __future__ import annotations

import threading


class CudaTransport:
    """Copies of flat uint8 storages between one CUDA device and pinned host memory."""

    def __init__(self, torch, device):
        self.torch = torch
        self.device = torch.device(device)
        self.d2h = torch.cuda.Stream(self.device)
        self.h2d = torch.cuda.Stream(self.device)
        self._free = {}  # nbytes -> [(pinned uint8 buffer, event of its last copy or None)]
        self._m = threading.Lock()
        self.pinned_bytes = 0
        self._marks = []  # timing events whose times were read: recorded again instead of made anew
        # the compute stream by its raw handle: torch.cuda.current_stream costs the host ~20 us a call under cProfile
        # (4623 calls in one T5-style step: bench/results/gpu-h200-2026-12-03-1, call 2), the raw handle ~1 us
        self._raw_current = getattr(torch._C, "_cuda_getCurrentRawStream", None)
        self._index = self.device.index if self.device.index is not None else torch.cuda.current_device()
        self._streams = {}

    # ----------------------------------------------------------------------------- pinned buffers
    def host_buffer(self, nbytes):
        with self._m:
            free = self._free.get(nbytes)
            if free:
                for i in range(len(free) - 1, -1, -1):
                    buf, ev = free[i]
                    if ev is None or ev.query():
                        free.pop(i)
                        return buf
        self.pinned_bytes += nbytes
        return self.torch.empty(nbytes, dtype=self.torch.uint8, pin_memory=True)

    def give_back(self, buf, last_event):
        """`buf` is free once `last_event` (its last copy; None: none in flight) has passed."""
        with self._m:
            self._free.setdefault(buf.numel(), []).insert(0, (buf, last_event))

    # ------------------------------------------------------------------------------------ copies
    def compute(self):
        if self._raw_current is None:
            return self.torch.cuda.current_stream(self.device)
        raw = self._raw_current(self._index)
        stream = self._streams.get(raw)
        if stream is None:
            stream = self._streams[raw] = self.torch.cuda.current_stream(self.device)
        return stream

    def to_host(self, flat, into=None):
        """`into`: a pinned buffer of flat's size to copy into instead of one from the pool (its last copy must be
        ordered before the compute queued so far: the copy waits for that compute, not for the buffer's event)."""
        host = into if into is not None else self.host_buffer(flat.numel())
        self.d2h.wait_stream(self.compute())
        with self.torch.cuda.stream(self.d2h):
            host.copy_(flat, non_blocking=True)
            ev = self.torch.cuda.Event()
            ev.record(self.d2h)
        return host, ev

    def to_host_many(self, flats, into=None):
        """Copies of several storages out at one call (Note [Batched moves] in activations.py): one wait for the
        compute queued so far, one event after them all. Returns (host buffers, event). `into`: per storage, a
        buffer to copy into or None (as to_host's)."""
        hosts = [b if b is not None else self.host_buffer(f.numel()) for f, b in zip(flats, into or [None] * len(flats))]
        self.d2h.wait_stream(self.compute())
        with self.torch.cuda.stream(self.d2h):
            for host, flat in zip(hosts, flats):
                host.copy_(flat, non_blocking=True)
            ev = self.torch.cuda.Event()
            ev.record(self.d2h)
        return hosts, ev

    def to_device_many(self, items):
        """Copies back of several storages at one call: [(host, nbytes, after)] -> [(device bytes, event)], the
        destinations allocated on the compute stream, one wait for the compute queued so far, one event."""
        torch = self.torch
        flats = [torch.empty(nbytes, dtype=torch.uint8, device=self.device) for _, nbytes, _ in items]
        self.h2d.wait_stream(self.compute())
        with torch.cuda.stream(self.h2d):
            waited = set()
            for (host, _, after), flat in zip(items, flats):
                if after is not None and id(after) not in waited:
                    waited.add(id(after))
                    self.h2d.wait_event(after)
                flat.copy_(host, non_blocking=True)
            ev = torch.cuda.Event()
            ev.record(self.h2d)
        return [(flat, ev) for flat in flats]

    def to_device(self, host, nbytes, after=None):
        return self.to_device_into(host, self.torch.empty(nbytes, dtype=self.torch.uint8, device=self.device), after)

    def to_device_into(self, host, flat, after=None):
        """Fills `flat` (device bytes allocated on the compute stream) from `host`, after `after`."""
        torch = self.torch
        self.h2d.wait_stream(self.compute())
        with torch.cuda.stream(self.h2d):
            if after is not None:
                self.h2d.wait_event(after)
            flat.copy_(host, non_blocking=True)
            ev = torch.cuda.Event()
            ev.record(self.h2d)
        return flat, ev

    def compute_wait(self, ev):
        self.compute().wait_event(ev)

    @staticmethod
    def done(ev):
        return ev is None or ev.query()

    # ------------------------------------------------------------------------------------ timing
    def mark(self):
        """A timing event on the compute stream, here. Making a timing event costs the host ~50 us on the
        H200 (the timed iteration's hooks took 149 ms of host time for 2190 marks on GPT-2 large, against
        43 ms without: bench/results/gpu-h200-2026-12-01-2, call 1), so events whose times were read are
        recorded again (reuse_marks)."""
        ev = self._marks.pop() if self._marks else self.torch.cuda.Event(enable_timing=True)
        ev.record(self.compute())
        return ev

    def reuse_marks(self, events):
        """`events` (from mark(), their times read) may be recorded again."""
        self._marks.extend(e for e in events if e is not None)

    @staticmethod
    def elapsed_ms(a, b):
        b.synchronize()
        return a.elapsed_time(b)

    def bandwidth(self, nbytes=256 << 20, repeats=3):
        """Pinned copy bandwidth each way (bytes/s), measured now on the copy streams."""
        torch = self.torch
        host = self.host_buffer(nbytes)
        dev = torch.empty(nbytes, dtype=torch.uint8, device=self.device)
        out = []
        for stream, dst, src in ((self.d2h, host, dev), (self.h2d, dev, host)):
            stream.wait_stream(self.compute())
            best = None
            for _ in range(repeats):
                a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                a.record(stream)
                with torch.cuda.stream(stream):
                    dst.copy_(src, non_blocking=True)
                b.record(stream)
                b.synchronize()
                ms = a.elapsed_time(b)
                best = ms if best is None else min(best, ms)
            out.append(nbytes / (best / 1e3))
        self.give_back(host, None)
        return out[0], out[1]
