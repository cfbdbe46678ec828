"""Copies between a CUDA device and pinned host memory on two side streams (activations:offload).

The transport of tierpack.activations.ActivationOffloader (Note [Activation offload] there): a copy out
waits for the compute stream's work queued so far and runs on its own stream; a copy back is allocated on
the compute stream (which frees it), waits for that stream, and runs on a second one (Note [Copies back]).
Pinned buffers are kept by size and reused once their last copy is over: asking PyTorch's pinned allocator
(which rounds to powers of two) for every copy out made copying every activation of GPT-2 large out 2x
slower on the H200 (bench/gpu/hooks_bench.py, bench/results/gpu-h200-2026-11-30-2).
"""

from __future__ import annotations

import threading
import weakref


def _empty_pinned(torch, t):
    return torch.empty_like(t, device="cpu", pin_memory=True)


class CudaTransport:
    """Copies between a CUDA device and pinned host memory on two side streams.

    pool: pinned buffers are kept by size and reused once their last copy is over, instead of asking
    PyTorch's pinned allocator (which rounds to powers of two) for every saved tensor."""

    def __init__(self, torch, device, pool=True):
        self.torch = torch
        self.device = torch.device(device)
        self.d2h = torch.cuda.Stream(self.device)
        self.h2d = torch.cuda.Stream(self.device)
        self.pool = pool
        self._free = {}  # (numel, dtype) -> [(flat pinned buffer, [event of its last copy])]
        self._m = threading.Lock()

    def _buffer(self, t):
        if not self.pool:
            return _empty_pinned(self.torch, t), None
        key = (t.numel(), t.dtype)
        with self._m:
            free = self._free.get(key)
            while free:
                flat, box = free[-1]
                if box[0] is not None and not box[0].query():
                    break  # the newest is still being read: the older ones are too, mostly
                free.pop()
                return flat, box
        flat = self.torch.empty(t.numel(), dtype=t.dtype, pin_memory=True)
        return flat, [None]

    def _recycle(self, key, flat, box):
        with self._m:
            self._free.setdefault(key, []).insert(0, (flat, box))

    def to_host(self, t):
        torch = self.torch
        flat, box = self._buffer(t)
        host = flat.view(t.shape) if box is not None else flat
        self.d2h.wait_stream(torch.cuda.current_stream(self.device))
        with torch.cuda.stream(self.d2h):
            host.copy_(t, non_blocking=True)
            ev = torch.cuda.Event()
            ev.record(self.d2h)
        if box is not None:
            box[0] = ev
            host._tierpack_box = box  # the H2D copy updates it; _Saved's death returns the buffer
            weakref.finalize(host, self._recycle, (t.numel(), t.dtype), flat, box)
        return host, ev

    def to_device(self, host, after=None):
        """Copies `host` back; `after`: the event of its copy out (the copy back waits for it on the GPU).

        Note [Copies back]
        The destination is allocated on the compute stream, which frees it later, so the copy first
        waits for the compute queued so far (the block may have been freed by work still running there).
        Allocating it on the copy stream instead, with record_stream for the compute stream's use, lets
        the copy start at once; on GPT-2 large on PyTorch's allocator that was no faster (two runs: within
        the +-30 ms the runs varied) and raised the reserved peak from 32.2 to 35.4-40.1 GiB (the copy
        stream's blocks form a second pool; bench/results/gpu-h200-2026-11-30-4)."""
        torch = self.torch
        gpu = torch.empty_strided(host.size(), host.stride(), dtype=host.dtype, device=self.device)
        self.h2d.wait_stream(torch.cuda.current_stream(self.device))
        with torch.cuda.stream(self.h2d):
            if after is not None:
                self.h2d.wait_event(after)
            gpu.copy_(host, non_blocking=True)
            ev = torch.cuda.Event()
            ev.record(self.h2d)
        box = getattr(host, "_tierpack_box", None)
        if box is not None:
            box[0] = ev
        return gpu, ev

    @staticmethod
    def done(ev):
        return ev.query()

    @staticmethod
    def wait(ev):
        ev.synchronize()

    def use(self, ev):
        self.torch.cuda.current_stream(self.device).wait_event(ev)
