"""Note [Host side steps aside] (core/config.hpp): `tierpack run --gpu-budget X` with nothing for the host
side to do enables the GPU tier alone; with anything for the host (a fast budget, a plan, tiers, -o), or with
no GPU tier installed, the host side is enabled as before. The library's answer is read through the real C
ABI (libtierpack_torch.so); the bootstrap's choice with the GPU tier's install stubbed (no GPU here).

Run: TIERPACK_LIB=build/lib/libtierpack_torch.so /usr/bin/python3 tests/integrations/python/host_side_test.py
"""
import importlib.util
import io
import os
import sys
import types
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "python"))

import tierpack  # noqa: E402


def bootstrap_module():
    spec = importlib.util.spec_from_file_location("tierpack_bootstrap_under_test",
                                                  os.path.join(ROOT, "python", "sitecustomize", "sitecustomize.py"))
    module = importlib.util.module_from_spec(spec)
    saved = os.environ.pop("TIERPACK_CONF", None)  # loading it must not bootstrap anything
    try:
        spec.loader.exec_module(module)
    finally:
        if saved is not None:
            os.environ["TIERPACK_CONF"] = saved
    return module


class HostSideTest(unittest.TestCase):
    def needed(self, conf):
        return tierpack.host_side_needed(conf)

    def test_the_library_says_when_the_host_side_has_nothing_to_do(self):
        self.assertFalse(self.needed("mode:run,gpu_budget:1G,stats_out:/tmp/s.json"))
        for conf in ("mode:run,gpu_budget:1G,fast_budget:4G", "mode:run,gpu_budget:1G,profile_out:/tmp/r.tpk",
                     "mode:run,gpu_budget:1G,tiers:preset:h200-pcie", "mode:run,gpu_budget:1G,plan:/tmp/p.json",
                     "mode:run", "mode:run,fast_budget:50%", "mode:profile,gpu_budget:1G"):
            with self.subTest(conf=conf):
                self.assertTrue(self.needed(conf))
        with self.assertRaises(tierpack.TierpackError):
            self.needed("mode:run,gpu_budget:banana")

    def run_bootstrap(self, conf, gpu_installed):
        boot = bootstrap_module()
        calls = []
        cuda = types.ModuleType("tierpack.cuda")
        cuda.install_from_env = lambda: gpu_installed
        enable = tierpack.enable
        saved_cuda = sys.modules.get("tierpack.cuda")
        sys.modules["tierpack.cuda"] = cuda
        tierpack.cuda = cuda
        tierpack.enable = lambda conf=None: calls.append(("enable", conf)) or True
        err, sys.stderr = sys.stderr, io.StringIO()
        os.environ["TIERPACK_CONF"] = conf
        try:
            boot._enable_tierpack()
            return calls, sys.stderr.getvalue(), os.environ.get("TIERPACK_CONF")
        finally:
            sys.stderr = err
            tierpack.enable = enable
            os.environ.pop("TIERPACK_CONF", None)
            if saved_cuda is not None:
                sys.modules["tierpack.cuda"] = saved_cuda
            else:
                sys.modules.pop("tierpack.cuda", None)

    def test_the_bootstrap_leaves_the_host_side_off_when_the_gpu_tier_runs_alone(self):
        calls, err, left = self.run_bootstrap("mode:run,gpu_budget:1G", gpu_installed=True)
        self.assertEqual(calls, [])
        self.assertIn("the host side stays off: nothing to place on the host", err)
        self.assertIsNone(left)  # processes it starts inherit no configuration

    def test_the_bootstrap_enables_the_host_side_when_it_has_work_or_no_gpu_tier_ran(self):
        busy = "mode:run,gpu_budget:1G,fast_budget:4G"
        for conf, gpu, given in ((busy, True, busy),
                                 ("mode:run,gpu_budget:1G", False, None)):  # (None: enable() reads the environment)
            with self.subTest(conf=conf, gpu=gpu):
                calls, err, _ = self.run_bootstrap(conf, gpu_installed=gpu)
                self.assertEqual(calls, [("enable", given)])
                self.assertNotIn("stays off", err)


if __name__ == "__main__":
    unittest.main()
