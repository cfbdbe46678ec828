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

Note [Raw copies]
Through torch's Python API each copy costs the host a stream switch (``with torch.cuda.stream``), a wait
(``wait_stream``: an event made and recorded), the copy's dispatch and an event made and recorded: the hooks
spent 80 us of host time per copy issued on the T5-style model (bench/results/gpu-h200-2026-12-07-1, call 2),
and the mover's copies of 1 MiB storages reached 0.47 of plain pinned copies. With ``copies:raw`` (the default,
TIERPACK_GPU) a batch of copies is one call into libtierpack_cuda.so (``RawCopies``, migrate/gpu/storage_copies.hpp):
the copy stream waits for the compute stream and the copies out the batch needs, the copies run in order, one
event (a CUDA event of the library's, not torch's) is recorded after them. The host's time per copy fell to 0.47x
(one a call) and 0.70x (eight a call); on the T5-style model copying 14.2 GB each way the same plan ran 541.5 ms a
step against 680.7 ms, the hooks spending 33 against 78 us per copy issued (bench/results/gpu-h200-2026-12-08-1,
calls 1 and 3). Torch's copy marks the pinned block it used so that its host allocator does not hand it out again
before the copy ends; a raw copy does not, so the transport holds every pinned buffer of a batch until its event has
passed (``_in_flight``), whatever the mover does with it. Each call leaves the calling thread's CUDA context as it
found it (migrate/gpu/storage_copies.cpp, Note [The caller's context]: torch's device guards do so for its own
copies). Device memory is ordered as before: a copy out's source is freed on the compute stream after it waited for
the copy, a copy back's destination is used after the compute stream waited for it.
"""

from __future__ import annotations

import collections
import ctypes
import threading

from tierpack._storage import flat_bytes


class RawEvent:
    """A CUDA event of libtierpack_cuda.so's (no timing): ``query()`` as torch's events have, freed with the object."""

    __slots__ = ("handle", "_copies")

    def __init__(self, copies, handle):
        self._copies, self.handle = copies, handle

    def query(self):
        return self._copies.done(self)

    def __del__(self):
        try:
            self._copies.release(self.handle)
        except Exception:  # noqa: BLE001 - interpreter shutdown: the library may be gone
            pass


class _Span:
    """A storage's address and size: all a raw copy out needs of it (no tensor made: Note [Raw copies])."""

    __slots__ = ("ptr", "n")

    def __init__(self, ptr, n):
        self.ptr, self.n = ptr, n

    def data_ptr(self):
        return self.ptr

    def numel(self):
        return self.n


class RawCopies:
    """Stream-ordered copies through libtierpack_cuda.so's C ABI (Note [Raw copies]): one call per batch. Streams are
    CUDA stream handles (``torch.cuda.Stream.cuda_stream``; 0 is CUDA's default stream)."""

    def __init__(self, lib, device_index):
        """`lib`: libtierpack_cuda.so as tierpack/_native.py loads it (cuda_library())."""
        self._lib, self._device = lib, device_index
        self._spare = []  # events whose objects died: made again from here (Note [Raw copies])
        self._m = threading.Lock()
        if lib.tierpack_copies_open(device_index) != 0:
            raise RuntimeError(self._error("storage copies"))

    def _error(self, what):
        return "tierpack: %s on device %d failed: %s" % (what, self._device, self._lib.tierpack_gpu_last_error().decode())

    def event(self):
        with self._m:
            handle = self._spare.pop() if self._spare else 0
        if handle == 0:
            handle = self._lib.tierpack_copy_event_new(self._device)
            if handle == 0:
                raise RuntimeError(self._error("a copy event"))
        return RawEvent(self, handle)

    def release(self, handle):
        """An event no object holds any more: kept for the next one (recording it again is safe: a wait takes the
        record made before it)."""
        with self._m:
            if len(self._spare) < 256:
                self._spare.append(handle)
                return
        self._lib.tierpack_copy_event_free(self._device, handle)

    def done(self, ev):
        r = self._lib.tierpack_copy_event_done(self._device, ev.handle)
        if r < 0:
            raise RuntimeError(self._error("a copy event's query"))
        return r == 1

    def wait(self, stream, ev):
        """`stream` waits on the device for `ev`."""
        if self._lib.tierpack_copy_stream_wait(self._device, stream, ev.handle) != 0:
            raise RuntimeError(self._error("a stream's wait"))

    def copy(self, after, stream, waits, dst, src, nbytes, done):
        """Copies dst[i] <- src[i] (nbytes[i] bytes each, addresses as ints) on `stream`, after the work queued so far
        on stream `after` (None: no such wait) and after each RawEvent of `waits`, then records `done` there."""
        n, arr = len(dst), ctypes.c_uint64 * len(dst)
        w = (ctypes.c_uint64 * len(waits))(*[e.handle for e in waits]) if waits else None
        r = self._lib.tierpack_copy_batch(self._device, after is not None, after or 0, stream, w, len(waits),
                                          arr(*dst), arr(*src), arr(*nbytes), n, done.handle)
        if r != 0:
            raise RuntimeError(self._error("%d storage copies" % n))


class CudaTransport:
    """Copies of flat uint8 storages between one CUDA device and pinned host memory."""

    def __init__(self, torch, device, lib=None):
        """`lib`: libtierpack_cuda.so (tierpack/_native.py's cuda_library()) for raw copies (Note [Raw copies]);
        None: torch's calls."""
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
        self.raw = RawCopies(lib, self._index) if lib is not None and self._raw_current is not None else None
        self._in_flight = collections.deque()  # (event, pinned buffers) of raw batches not known to be done

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

    def source(self, storage):
        """What to_host / to_host_many copy out of `storage` (an UntypedStorage on the device): with raw copies its
        address and size, else a flat uint8 tensor over it."""
        if self.raw is not None:
            return _Span(storage.data_ptr(), storage.nbytes())
        return flat_bytes(self.torch, storage, self.device)

    def _raw_batch(self, copy_stream, waits, dst, src, nbytes, pinned):
        """One raw batch after the compute queued so far (Note [Raw copies]): its event, its pinned buffers held
        until the event has passed."""
        ev = self.raw.event()
        self.raw.copy(self._raw_current(self._index), copy_stream.cuda_stream, waits, dst, src, nbytes, ev)
        q = self._in_flight
        while q and q[0][0].query():
            q.popleft()
        q.append((ev, pinned))
        return ev

    def to_host(self, flat, into=None):
        """`into`: a pinned buffer of flat's size to copy into instead of one from the pool (its last copy must be
        ordered before the compute queued so far: the copy waits for that compute, not for the buffer's event)."""
        hosts, ev = self.to_host_many([flat], [into])
        return hosts[0], ev

    def to_host_many(self, flats, into=None):
        """Copies of several storages out at one call (Note [Batched moves] in activations.py): one wait for the
        compute queued so far, one event after them all. Returns (host buffers, event). `into`: per storage, a
        buffer to copy into or None (as to_host's)."""
        hosts = [b if b is not None else self.host_buffer(f.numel()) for f, b in zip(flats, into or [None] * len(flats))]
        if self.raw is not None:
            return hosts, self._raw_batch(self.d2h, (), [h.data_ptr() for h in hosts], [f.data_ptr() for f in flats],
                                          [f.numel() for f in flats], hosts)
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
        return self.to_device_into_many([(host, flat, after) for (host, _, after), flat in zip(items, flats)])

    def to_device_into_many(self, items):
        """Copies back into storages already on the device (optimizer state resized back), at one call:
        [(host, device bytes allocated on the compute stream, after)] -> [(device bytes, event)], one event."""
        ev = self._into_device(items)
        return [(flat, ev) for _, flat, _ in items]

    def to_device(self, host, nbytes, after=None):
        return self.to_device_into(host, self.torch.empty(nbytes, dtype=self.torch.uint8, device=self.device), after)

    def to_device_into(self, host, flat, after=None):
        """Fills `flat` (device bytes allocated on the compute stream) from `host`, after `after`."""
        return flat, self._into_device([(host, flat, after)])

    def _into_device(self, items):
        """[(pinned host, device bytes, the copy out to wait for or None)]: the copies back, after the compute queued
        so far and each copy out named once; their one event."""
        torch = self.torch
        if self.raw is not None:
            afters = list({id(a): a for _, _, a in items if a is not None}.values())
            return self._raw_batch(self.h2d, afters, [f.data_ptr() for _, f, _ in items],
                                   [h.data_ptr() for h, _, _ in items], [f.numel() for _, f, _ in items],
                                   [h for h, _, _ in items])
        self.h2d.wait_stream(self.compute())
        with torch.cuda.stream(self.h2d):
            waited = set()
            for host, flat, after in items:
                if after is not None and id(after) not in waited:  # each copy after its own copy out
                    waited.add(id(after))
                    self.h2d.wait_event(after)
                flat.copy_(host, non_blocking=True)
            ev = torch.cuda.Event()
            ev.record(self.h2d)
        return ev

    def compute_wait(self, ev):
        if self.raw is not None:
            self.raw.wait(self._raw_current(self._index), ev)
        else:
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

    def both_ways_bandwidth(self, nbytes=256 << 20, repeats=3):
        """Pinned copy bandwidth with a copy each way at once (bytes/s, both directions' bytes together over the
        time until both are done), measured now on the copy streams: what the streamed optimizer step gets
        (placer/saved_plan.cpp, Note [Streamed step])."""
        torch = self.torch
        out_host, in_host = self.host_buffer(nbytes), self.host_buffer(nbytes)
        src, dst = (torch.empty(nbytes, dtype=torch.uint8, device=self.device) for _ in range(2))
        best = None
        for _ in range(repeats):
            start = torch.cuda.Event(enable_timing=True)
            start.record(self.compute())
            ends = []
            for stream, to, frm in ((self.d2h, out_host, src), (self.h2d, dst, in_host)):
                stream.wait_event(start)
                with torch.cuda.stream(stream):
                    to.copy_(frm, non_blocking=True)
                e = torch.cuda.Event(enable_timing=True)
                e.record(stream)
                ends.append(e)
            for e in ends:
                e.synchronize()
            ms = max(start.elapsed_time(e) for e in ends)
            best = ms if best is None else min(best, ms)
        self.give_back(out_host, None)
        self.give_back(in_host, None)
        return 2 * nbytes / (best / 1e3)
