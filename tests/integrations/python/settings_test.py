"""Python reads the settings by name through libtierpack_cuda.so's C ABI (include/tierpack.h): one parser
(core/config.cpp) for TIERPACK_CONF and its alias TIERPACK_GPU, and the allocator's counters by name, the GPU budget
among them. On the memfd twin (TIERPACK_GPU_TEST_BACKEND=twin: no GPU needed).

Run: TIERPACK_CUDA_LIB=build/lib/libtierpack_cuda.so /usr/bin/python3 tests/integrations/python/settings_test.py
"""
import os
import sys
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "python"))
os.environ["TIERPACK_GPU_TEST_BACKEND"] = "twin"

import tierpack.cuda as tc  # noqa: E402

LIB = os.environ.get("TIERPACK_CUDA_LIB", "")


@unittest.skipUnless(LIB and os.path.exists(LIB), "libtierpack_cuda.so not built (set TIERPACK_CUDA_LIB)")
class SettingsTest(unittest.TestCase):
    def configure(self, conf, gpu):
        lib = tc._load(LIB)
        if lib.tierpack_gpu_configure(conf.encode(), gpu.encode()) != 0:
            raise ValueError(tc.last_error())
        return tc.settings()

    def test_a_setting_is_read_by_name_whichever_way_it_was_given(self):
        s = self.configure("mode:run,gpu_budget:64M,gpu_limit:hard,log:quiet", "step:stream,copies:torch")
        self.assertEqual(s["gpu_budget"], {"bytes": 64 << 20})
        self.assertEqual((s["gpu_limit"], s["gpu_step"], s["gpu_copies"]), ("hard", "stream", "torch"))
        self.assertEqual(s["gpu_mechanism"], "storage")
        self.assertAlmostEqual(s["gpu_fill"], 0.88)  # limit:hard's default, resolved by the runtime
        self.assertAlmostEqual(s["gpu_fits_fraction"], 0.98)
        self.assertEqual(self.configure("gpu_budget:60%", "")["gpu_budget"], {"fraction": 0.6})

    def test_a_key_given_both_ways_with_different_values_is_one_error_naming_both(self):
        with self.assertRaisesRegex(ValueError, r"^TIERPACK_GPU: 'limit:soft' conflicts with TIERPACK_CONF's "
                                                r"'gpu_limit:hard' \(give it once\)$"):
            self.configure("gpu_limit:hard", "limit:soft")
        with self.assertRaisesRegex(ValueError, "unknown key 'limt' \\(accepted keys: budget, mechanism"):
            self.configure("", "limt:hard")

    def test_the_gpu_budget_reaches_the_allocator_and_is_read_back_by_name(self):
        lib = tc._load(LIB)
        self.configure("gpu_budget:48M,log:quiet", "mechanism:vmm,chunk:2M")
        p = lib.tierpack_cuda_malloc_nothrow(1 << 20, 0, None)
        self.assertTrue(p, tc.last_error())
        try:
            self.assertEqual(lib.tierpack_gpu_memory_stat(0, b"gpu_budget"), 48 << 20)
            self.assertGreaterEqual(lib.tierpack_gpu_memory_stat(0, b"allocated"), 1 << 20)
            self.assertEqual(lib.tierpack_gpu_memory_stat(0, b"budget"), 0)
            self.assertIn("unknown counter 'budget'", tc.last_error())
        finally:
            lib.tierpack_cuda_free(p, 1 << 20, 0, None)


if __name__ == "__main__":
    unittest.main(verbosity=2)
