"""One compiled graph per block (Note [Compile per block] in python/tierpack/compile_split.py), on real torch modules.

The machine's torch (Debian's 1.13) has no torch.compile, so the test hands CompileSplit a torch whose nn is the
real one and whose compile, Dynamo graph break and is_compiling are recorders: the real blocks (find_blocks on real
modules) must get the breaks, only while "compiling", for torch.compile(model) and for model.compile()'s bound
_call_impl, never for a function or with compile:whole. StorageMover.shield_from_compiler runs on a stub of the
mover: the hooks are pushed again through torch.compiler.disable only when tierpack's are on top of the stack.

Run: /usr/bin/python3 tests/integrations/python/compile_split_test.py
"""
import os
import sys
import types
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "python"))

import torch  # noqa: E402

from tierpack.activations import StorageMover  # noqa: E402
from tierpack.compile_split import CompileSplit  # noqa: E402


class Block(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(8, 8)
        self.norm = torch.nn.LayerNorm(8)

    def forward(self, x):
        return self.norm(self.fc(x))


class Net(torch.nn.Module):
    def __init__(self, n=3):
        super().__init__()
        self.embed = torch.nn.Linear(8, 8)
        self.layers = torch.nn.ModuleList([Block() for _ in range(n)])
        self.head = torch.nn.Linear(8, 2)

    def forward(self, x):
        x = self.embed(x)
        for b in self.layers:
            x = b(x)
        return self.head(x)


class FakeTorch:
    """The real torch.nn, with torch.compile, graph_break and is_compiling recorded."""

    def __init__(self):
        self.nn = torch.nn
        self.Tensor = torch.Tensor
        self.compiling = False
        self.events = []
        self.compiled = []
        self._dynamo = types.SimpleNamespace(graph_break=lambda: self.events.append("break"))
        self.compiler = types.SimpleNamespace(is_compiling=lambda: self.compiling)

        def compile(model=None, *args, **kwargs):
            self.compiled.append((model, args, kwargs))
            return model
        self.compile = compile


class CompileSplitTest(unittest.TestCase):
    def setUp(self):
        self.t = FakeTorch()
        self.logs = []

    def split(self, **kw):
        cs = CompileSplit(self.t, self.logs.append, **kw)
        self.assertTrue(cs.install())
        return cs

    def test_a_compiled_model_breaks_before_each_block_only_while_traced(self):
        original = self.t.compile
        cs = self.split()
        net = Net(3)
        self.assertIs(self.t.compile(net, mode="default"), net)
        self.assertEqual(self.t.compiled, [(net, (), {"mode": "default"})], "torch.compile gets what it was given")
        net(torch.randn(2, 8))
        self.assertEqual(self.t.events, [], "eager code: no break")
        self.t.compiling = True
        net(torch.randn(2, 8))
        self.assertEqual(self.t.events, ["break"] * 3, "one break before each of the 3 blocks")
        self.assertIn("breaks before each of its 3 Block blocks", self.logs[0])
        self.t.compile(net)
        self.assertEqual(len(self.logs), 1, "a model is split once")
        cs.remove()
        self.assertIs(self.t.compile, original)
        self.t.events.clear()
        net(torch.randn(2, 8))
        self.assertEqual(self.t.events, [], "remove() takes the hooks off")

    def test_module_compile_hands_torch_compile_its_bound_call_and_is_split(self):
        self.split()
        net = Net(2)
        self.t.compile(net._call_impl)
        self.t.compiling = True
        net(torch.randn(2, 8))
        self.assertEqual(self.t.events, ["break"] * 2)

    def test_a_function_or_compile_whole_is_left_as_the_script_made_it_and_on_compile_runs_each_call(self):
        calls = []
        self.split(split=False, on_compile=lambda: calls.append(1))
        net = Net(2)
        self.t.compile(net)
        self.t.compile(lambda x: x + 1)
        self.t.compiling = True
        net(torch.randn(2, 8))
        self.assertEqual((self.t.events, len(calls), self.logs), ([], 2, []))

    def test_fullgraph_keeps_one_graph_and_says_so(self):
        self.split()
        net = Net(2)
        self.t.compile(net, fullgraph=True)
        self.t.compiling = True
        net(torch.randn(2, 8))
        self.assertEqual(self.t.events, [], "a graph break under fullgraph=True is an error")
        self.assertIn("fullgraph=True", self.logs[0])

    def test_a_model_without_repeated_blocks_is_said_so(self):
        self.split()
        self.t.compile(torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.ReLU()))
        self.assertIn("has no repeated blocks", self.logs[0])

    def test_without_torch_2_nothing_is_wrapped(self):
        bare = types.SimpleNamespace(nn=torch.nn)  # torch 1.13 has no compile, _dynamo or compiler
        cs = CompileSplit(bare)
        self.assertFalse(cs.available())
        self.assertFalse(cs.install())
        self.assertFalse(hasattr(bare, "compile"))


class ShieldTest(unittest.TestCase):
    """StorageMover.shield_from_compiler on a stub mover: the hook stack of a fake autograd."""

    def mover(self, stack, with_top=True):
        ag = types.SimpleNamespace(
            _pop_saved_tensors_default_hooks=lambda: stack.pop(),
            _push_saved_tensors_default_hooks=lambda p, u: stack.append((p, u)))
        if with_top:
            ag._top_saved_tensors_default_hooks = lambda ignore_tracing: stack[-1] if stack else None
        fake = types.SimpleNamespace(_C=types.SimpleNamespace(_autograd=ag),
                                     compiler=types.SimpleNamespace(disable=lambda f: ("disabled", f)))
        m = types.SimpleNamespace(torch=fake, _shielded=False, logs=[])
        m.pack, m.unpack = (lambda t: t), (lambda t: t)
        m.log = m.logs.append
        stack.append((m.pack, m.unpack))
        return m

    def test_the_hooks_on_top_are_pushed_again_disabled_once(self):
        stack = []
        m = self.mover(stack)
        self.assertTrue(StorageMover.shield_from_compiler(m))
        self.assertEqual(stack, [(("disabled", m.pack), ("disabled", m.unpack))])
        self.assertTrue(StorageMover.shield_from_compiler(m))
        self.assertEqual(len(stack), 1, "once")

    def test_other_hooks_on_top_are_never_popped(self):
        stack = []
        m = self.mover(stack)
        theirs = (lambda t: t, lambda t: t)
        stack.append(theirs)
        self.assertFalse(StorageMover.shield_from_compiler(m))
        self.assertIs(stack[-1], theirs)
        self.assertEqual(len(stack), 2)
        self.assertIn("other saved-tensor hooks above tierpack's", m.logs[0])

    def test_a_torch_that_cannot_say_which_hooks_are_on_top_is_left_alone(self):
        stack = []
        m = self.mover(stack, with_top=False)
        self.assertFalse(StorageMover.shield_from_compiler(m))
        self.assertEqual(stack, [(m.pack, m.unpack)])


if __name__ == "__main__":
    unittest.main(verbosity=2)
