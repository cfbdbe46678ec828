"""The storage mover's raw copies (python/tierpack/copy_streams.py RawCopies, Note [Raw copies]) through
libtierpack_cuda.so's C ABI on the memfd twin (TIERPACK_GPU_TEST_BACKEND=twin: streams are worker threads, copies
memcpy): the ctypes binding passes addresses, sizes, waits and events as the library reads them; a bad copy is an
error naming it, with nothing queued; events of dead objects are reused. No torch needed. The ordering against
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
        cls.copies = RawCopies(ctypes.CDLL(LIB), 0)

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


if __name__ == "__main__":
    unittest.main()
