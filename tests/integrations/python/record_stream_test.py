"""tierpack.cuda hands PyTorch's pluggable allocator the function that record_stream must reach.

PyTorch ignores Tensor.record_stream for a pluggable allocator unless set_record_stream_fn names a C
function; without it a block used on a second stream could be reused while that stream still reads it,
and the stream would not be held at the page-group mover's remap gates. Checked with a stand-in for
PyTorch's allocator object (this machine's torch has no pluggable allocator) and the real library on the
memfd twin (TIERPACK_GPU_TEST_BACKEND=twin): the pointer handed over is tierpack_cuda_record_stream, and
calling through it with a tierpack block adds that stream to the ones the remap gates hold; so does
tierpack.cuda.gate_stream for a stream that allocates nothing.

Run: TIERPACK_CUDA_LIB=build/lib/libtierpack_cuda.so python3 tests/integrations/python/record_stream_test.py
"""
import ctypes
import io
import os
import sys
import unittest
from contextlib import redirect_stderr

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "python"))
os.environ["TIERPACK_GPU_TEST_BACKEND"] = "twin"

import tierpack.cuda as tc  # noqa: E402

LIB = os.environ.get("TIERPACK_CUDA_LIB", "")
_configured = []


def _block(lib):
    """A 1 MiB block of device 0 on the twin (the first call configures the runtime: 64 MiB budget)."""
    if not _configured:
        assert lib.tierpack_gpu_configure(b"gpu_budget:64M", None) == 0, lib.tierpack_gpu_last_error()
        _configured.append(True)
    p = lib.tierpack_cuda_malloc_nothrow(1 << 20, 0, None)
    assert p, lib.tierpack_gpu_last_error()
    return p


class _Native:
    def __init__(self):
        self.fn = None

    def set_record_stream_fn(self, ptr):
        self.fn = ptr


class _Pluggable:
    def __init__(self, native):
        self.native = native

    def allocator(self):
        return self.native


@unittest.skipUnless(LIB and os.path.exists(LIB), "libtierpack_cuda.so not built (set TIERPACK_CUDA_LIB)")
class RecordStreamTest(unittest.TestCase):
    def test_the_allocator_is_told_to_call_tierpack_cuda_record_stream(self):
        lib = tc._load(LIB)
        native = _Native()
        self.assertTrue(tc._forward_record_stream(_Pluggable(native), lib))
        self.assertEqual(native.fn, ctypes.cast(lib.tierpack_cuda_record_stream, ctypes.c_void_p).value)
        # Through the pointer, as PyTorch will call it: a block of the twin, a stream it never saw.
        p = _block(lib)
        streams = lambda: tc.stats(0)["allocator"]["streams"]  # noqa: E731
        before = streams()
        record = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p)(native.fn)
        error_before = lib.tierpack_gpu_last_error()  # another test's expected error may be there
        record(p, 0x1234)
        self.assertEqual(lib.tierpack_gpu_last_error(), error_before)
        self.assertEqual(streams(), before + 1, "the stream is not among those held at remap gates")
        lib.tierpack_cuda_free(p, 1 << 20, 0, None)

    def test_a_pytorch_that_cannot_forward_it_is_named(self):
        lib = tc._load(LIB)
        err = io.StringIO()
        with redirect_stderr(err):
            self.assertFalse(tc._forward_record_stream(_Pluggable(object()), lib))
        self.assertIn("does not pass record_stream", err.getvalue())


@unittest.skipUnless(LIB and os.path.exists(LIB), "libtierpack_cuda.so not built (set TIERPACK_CUDA_LIB)")
class GateStreamTest(unittest.TestCase):
    """tierpack.cuda.gate_stream: a stream that allocates nothing is held at remap gates."""

    @classmethod
    def setUpClass(cls):
        cls.lib = tc._load(LIB)
        cls.block = _block(cls.lib)  # device 0's runtime exists from here

    def streams(self):
        return tc.stats(0)["allocator"]["streams"]

    def test_a_stream_can_be_gated_by_hand_and_an_unknown_device_is_an_error(self):
        before = self.streams()
        tc.gate_stream(0xABC000, device=0)
        self.assertEqual(self.streams(), before + 1)
        with self.assertRaisesRegex(RuntimeError, "no runtime for CUDA device 5"):
            tc.gate_stream(0xABC000, device=5)


if __name__ == "__main__":
    unittest.main(verbosity=2)
