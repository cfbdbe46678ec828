"""bench/gpu/gpt2_bench.py's NvmlSampler: the peak after reset() counts only samples taken after it.

The sampler's NVML read is replaced by a slow fake (a read takes 20 ms, as a slow NVML call would): a
reset during a read of the warm-up's high value must not bring that value back (calls 4-5 of
bench/results/gpu-h200-2026-12-01-2 reported the warm-up's peak as the timed steps' this way).
"""
import os
import sys
import threading
import time
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "bench", "gpu"))

from gpt2_bench import NvmlSampler  # noqa: E402


class SlowMemory:
    def __init__(self):
        self.value = 100
        self.reading = threading.Event()

    def used(self):
        v = self.value
        self.reading.set()
        time.sleep(0.02)
        return v


class NvmlSamplerTest(unittest.TestCase):
    def test_a_reset_during_a_read_drops_that_read(self):
        for _ in range(5):
            mem = SlowMemory()
            s = NvmlSampler(used=mem.used)
            mem.value = 900            # the warm-up's peak
            time.sleep(0.05)
            mem.reading.clear()
            mem.reading.wait(1)        # a read of 900 is under way (or about to return)
            mem.value = 300            # the warm-up is over
            s.reset()
            time.sleep(0.1)
            s.stop = True
            s.t.join(1)
            self.assertEqual(s.peak, 300)
            self.assertEqual(s.peak_bytes(), 200)  # over the baseline read at start

    def test_the_peak_follows_what_is_read(self):
        mem = SlowMemory()
        s = NvmlSampler(used=mem.used)
        s.reset()
        mem.value = 500
        time.sleep(0.1)
        mem.value = 200
        time.sleep(0.1)
        s.stop = True
        s.t.join(1)
        self.assertEqual(s.peak, 500)


if __name__ == "__main__":
    unittest.main()
