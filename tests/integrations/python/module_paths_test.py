"""Module paths under real torch (Note [Module paths] in integrations/torch/python_source.cpp).

`tierpack profile` runs tests/integrations/scripts/module_paths.py, whose `# MODULE: <path> <bytes>` tags
say which module allocates a tensor of which size on which line; the summary (text and --json) must name
those modules, tensors of backward must say "(backward)", and the memory_viz snapshot's frames must carry
the module next to the source line. `--python-source off` records neither.

Run: TIERPACK_CLI=build/bin/tierpack /usr/bin/python3 tests/integrations/python/module_paths_test.py
"""
import json
import os
import re
import subprocess
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", "..", ".."))
SCRIPT = os.path.join(ROOT, "tests", "integrations", "scripts", "module_paths.py")
CLI = os.environ.get("TIERPACK_CLI") or os.path.join(ROOT, "build", "bin", "tierpack")
PYTHON = os.environ.get("TIERPACK_TEST_PYTHON") or "/usr/bin/python3"


def expected_modules():
    """{(line, bytes): module path} from the script's tags."""
    out = {}
    with open(SCRIPT) as f:
        for n, line in enumerate(f, 1):
            m = re.search(r"# MODULE: (.*)$", line)
            if m and not line.lstrip().startswith("#"):
                for item in m.group(1).split(","):
                    path, size = item.split()
                    out[(n, int(size))] = path
    return out


def run(*args):
    r = subprocess.run([CLI, *args], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=300)
    if r.returncode != 0:
        raise AssertionError("tierpack %s failed (%d):\n%s" % (" ".join(args), r.returncode, r.stdout))
    return r.stdout


class ModulePaths(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        cls.profile = os.path.join(cls.tmp.name, "modules.tpk")
        run("profile", "-o", cls.profile, "--", PYTHON, SCRIPT)
        cls.summary = json.loads(run("profile", "--summary", cls.profile, "--json", "--top", "100000"))
        cls.text = run("profile", "--summary", cls.profile, "--top", "100000")

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def test_tagged_tensors_name_their_module(self):
        want = expected_modules()
        self.assertEqual(len(want), 7)
        got = {}
        for t in self.summary["top_tensors"]:
            src = t["source"]
            if src and src["file"] == SCRIPT and (src["line"], t["bytes"]) in want:
                got.setdefault((src["line"], t["bytes"]), set()).add(src["module"])
        for key, path in want.items():
            self.assertEqual(got.get(key), {path}, "line %d, %d bytes" % key)

    def test_backward_says_so(self):
        modules = [t["source"]["module"] for t in self.summary["top_tensors"] if t["source"]]
        self.assertIn("(backward)", modules)
        self.assertFalse([m for m in modules if m and m != "(backward)" and not re.match(r"^(Net|blocks\.[0-2](\.fc)?)$", m)],
                         modules)

    def test_text_summary_has_a_module_column(self):
        header = next(line for line in self.text.splitlines() if "allocated by" in line)
        self.assertIn("module", header.split())
        self.assertIn("blocks.1.fc", self.text)

    def test_memory_viz_frames_carry_the_module(self):
        out = os.path.join(self.tmp.name, "report")
        run("report", self.profile, "-o", out)
        with open(os.path.join(out, "memory_snapshot.json")) as f:
            snapshot = json.load(f)
        names = [fr["name"] for trace in snapshot["device_traces"] for e in trace for fr in e.get("frames", [])
                 if fr.get("filename") == SCRIPT]
        self.assertIn("forward in blocks.1.fc", names)
        self.assertIn("forward in blocks.1", names)
        self.assertIn("<module> in (backward)", names)

    def test_python_source_off_records_no_module(self):
        path = os.path.join(self.tmp.name, "off.tpk")
        run("profile", "--python-source", "off", "-o", path, "--", PYTHON, SCRIPT)
        summary = json.loads(run("profile", "--summary", path, "--json", "--top", "100000"))
        self.assertTrue(all(t["source"] is None for t in summary["top_tensors"]))


if __name__ == "__main__":
    unittest.main()
