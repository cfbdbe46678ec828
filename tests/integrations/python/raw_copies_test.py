"""The storage mover's raw copies (python/tierpack/copy_streams.py RawCopies, Note [Raw copies]) through
libtierpack_cuda.so's C ABI on the memfd twin (TIERPACK_GPU_TEST_BACKEND=twin: streams are worker threads, copies
memcpy): the ctypes binding passes addresses, sizes, waits and events as the library reads them; a bad copy is an
error naming it, with nothing queued; events of dead objects are reused. No torch needed for those; with torch,
CudaTransport's raw mode copies storages out and back through it (CPU tensors standing in for the device's, every
stream the twin's default one). The ordering against
other streams is tested in C++ (tests/migrate/gpu/storage_copies_test.cpp, twin and CUDA) and the transport on the
H200 (storage_mover_cuda_test.py).

Run: TIERPACK_CUDA_LIB=build/lib/libtierpack_cuda.so python3 tests/integrations/python/raw_copies_test.py
"""
import ctypes
import gc
import os
import sys
import time
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "python"))
os.environ["TIERPACK_GPU_TEST_BACKEND"] = "twin"

from tierpack import _native  # noqa: E402
from tierpack.copy_streams import RawCopies  # noqa: E402

LIB = os.environ.get("TIERPACK_CUDA_LIB", "")
DEFAULT_STREAM = 0  # the twin's default stream, as CUDA's handle 0 is


def settle(ev, seconds=5.0):
    """Polls `ev` for at most `seconds` (the twin's stream thread runs the copies)."""
    end = time.monotonic() + seconds
    while not ev.query():
        if time.monotonic() > end:
            raise AssertionError("a copy event did not pass in %.0f s" % seconds)
        time.sleep(0.001)


@unittest.skipUnless(LIB and os.path.exists(LIB), "TIERPACK_CUDA_LIB (libtierpack_cuda.so) is not set")
class RawCopiesTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.copies = RawCopies(_native.cuda_library(LIB), 0)

    def buffers(self, n, fill):
        src = [ctypes.create_string_buffer(bytes([fill + i]) * (1000 + i), 1000 + i) for i in range(n)]
        dst = [ctypes.create_string_buffer(1000 + i) for i in range(n)]
        return src, dst

    def test_a_batch_copies_every_storage_in_order_and_its_event_covers_them(self):
        src, dst = self.buffers(3, 40)
        ev = self.copies.event()
        self.copies.copy(DEFAULT_STREAM, DEFAULT_STREAM, (), [ctypes.addressof(d) for d in dst],
                         [ctypes.addressof(s) for s in src], [len(s) for s in src], ev)
        settle(ev)
        self.assertEqual([d.raw for d in dst], [s.raw for s in src])
        # a second batch waits for the first one's event (given as a wait) and overwrites the first copy
        again = self.copies.event()
        self.copies.copy(None, DEFAULT_STREAM, [ev], [ctypes.addressof(dst[0])], [ctypes.addressof(src[2])], [1000],
                         again)
        settle(again)
        self.assertEqual(dst[0].raw, src[2].raw[:1000])

    def test_a_copy_with_a_null_address_is_an_error_naming_it_and_nothing_is_queued(self):
        src, dst = self.buffers(2, 70)
        ev = self.copies.event()
        with self.assertRaises(RuntimeError) as cm:
            self.copies.copy(DEFAULT_STREAM, DEFAULT_STREAM, (), [ctypes.addressof(dst[0]), 0],
                             [ctypes.addressof(src[0]), ctypes.addressof(src[1])], [1000, 1001], ev)
        msg = str(cm.exception)
        self.assertIn("storage copy 1 of 2: 1001 bytes with a null destination", msg)
        self.assertEqual(msg.count("\n"), 0, "one line")
        self.assertTrue(ev.query(), "the batch's event was not recorded")
        self.assertEqual(dst[0].raw, bytes(1000), "the good copy before the bad one was not queued either")

    def test_events_of_dead_objects_are_made_again(self):
        ev = self.copies.event()
        handle = ev.handle
        del ev
        gc.collect()
        self.assertEqual(self.copies.event().handle, handle)

    def test_a_wait_on_the_default_stream_is_accepted(self):
        ev = self.copies.event()
        src, dst = self.buffers(1, 90)
        self.copies.copy(DEFAULT_STREAM, DEFAULT_STREAM, (), [ctypes.addressof(dst[0])], [ctypes.addressof(src[0])],
                         [1000], ev)
        self.copies.wait(DEFAULT_STREAM, ev)
        settle(ev)
        self.assertEqual(dst[0].raw, src[0].raw)


try:
    import torch  # noqa: E402
except ImportError:
    torch = None


class _TwinCuda:
    """torch.cuda as CudaTransport uses it, over the twin's default stream (handle 0)."""

    class Stream:
        cuda_stream = DEFAULT_STREAM

        def __init__(self, device=None):
            pass

    @staticmethod
    def current_device():
        return 0

    @staticmethod
    def current_stream(device=None):
        return _TwinCuda.Stream()


class _TwinTorch:
    """The torch CudaTransport sees: CPU tensors for the device's and the pinned ones."""

    def __init__(self):
        self.uint8, self.device, self.cuda = torch.uint8, torch.device, _TwinCuda
        self._C = type("C", (), {"_cuda_getCurrentRawStream": staticmethod(lambda index: DEFAULT_STREAM)})

    @staticmethod
    def empty(n, dtype=None, device=None, pin_memory=False):
        return torch.empty(n, dtype=dtype)


@unittest.skipUnless(LIB and os.path.exists(LIB) and torch is not None, "needs TIERPACK_CUDA_LIB and torch")
class RawTransportTest(unittest.TestCase):
    def test_storages_go_out_and_come_back_bit_identical_and_pinned_buffers_stay_held_until_their_copy_ends(self):
        from tierpack.copy_streams import CudaTransport

        tr = CudaTransport(_TwinTorch(), "cuda:0", _native.cuda_library(LIB))
        self.assertIsNotNone(tr.raw)
        src = [torch.randint(0, 255, (n,), dtype=torch.uint8) for n in (4096, 1000, 77)]
        one = tr.to_host(tr.source(src[0].untyped_storage() if hasattr(src[0], "untyped_storage")
                                   else src[0].storage().untyped()))
        many, ev = tr.to_host_many(src[1:])
        settle(one[1])
        settle(ev)
        outs = [one[0]] + many
        self.assertTrue(all(torch.equal(o, s) for o, s in zip(outs, src)))
        self.assertTrue(all(any(o is h for _, hs in tr._in_flight for h in hs) for o in outs[-2:]),
                        "a batch's pinned buffers are held while it may still run")
        back = tr.to_device_many([(o, o.numel(), e) for o, e in zip(outs, (one[1], ev, ev))])
        into = torch.zeros(4096, dtype=torch.uint8)
        flat, ev2 = tr.to_device_into(outs[0], into, one[1])
        settle(back[0][1])
        settle(ev2)
        self.assertTrue(all(torch.equal(f, s) for (f, _), s in zip(back, src)))
        self.assertTrue(flat is into and torch.equal(into, src[0]))
        intos = [torch.zeros(o.numel(), dtype=torch.uint8) for o in outs[1:]]  # optimizer state's batch
        got = tr.to_device_into_many([(o, i, ev) for o, i in zip(outs[1:], intos)])
        self.assertEqual(len({id(e) for _, e in got}), 1, "one event for the batch")
        settle(got[0][1])
        self.assertTrue(all(f is i and torch.equal(i, s) for (f, _), i, s in zip(got, intos, src[1:])))
        tr.compute_wait(ev2)
        _, last = tr.to_host(src[2])  # a later batch lets go of the finished ones
        self.assertEqual(len(tr._in_flight), 1)
        settle(last)  # (the twin's stream thread must be done with the tensors before the test frees them)


if __name__ == "__main__":
    unittest.main()
