"""One compiled graph per block under torch.compile (TIERPACK_GPU ``compile:blocks``, the default).

Note [Compile per block]
~~~~~~~~~~~~~~~~~~~~~~~~
A model compiled whole by ``torch.compile`` has one backward: AOTAutograd's ``CompiledFunction.backward`` reads
``ctx.saved_tensors`` before its first kernel, so every saved tensor is unpacked at once at the start of backward.
What the mover copied out must all be back by then: no copy back overlaps backward's compute, and the peak at
backward's start holds every saved tensor, copied out or not. Measured on an H100 at 60% of compile's peak
(bench/results/gpu-h200-2026-12-14-1, call 1): HF GPT-2 large and the Llama-style decoder under compile with
activation memory budget 0.1 ran 2.00x and 2.13x compile's step, at 0.58-0.60 of the transfer bound, and the cost
model (which lets copies back overlap backward) predicted them 18-21% fast.

So where the mover is on, tierpack wraps ``torch.compile``: a module given to it (``torch.compile(model)``, or
``model.compile()``, which hands torch.compile the module's bound ``_call_impl``) gets, before Dynamo traces
anything, a forward pre-hook on each of its blocks (the blocks of Note [Block recompute],
python/tierpack/module_recompute.py: GPT-2's and Llama's decoder layers, T5's blocks, ResNet's bottlenecks) that
breaks Dynamo's graph there (``torch._dynamo.graph_break()``, only while Dynamo traces: the hook does nothing in
eager code). Each block then runs as its own compiled graph with its own backward, which unpacks only that block's
saved tensors, when backward reaches it: the copies back of a block overlap the backward of the block after it, as
in eager. This is the regional compilation PyTorch recommends for repeated layers (and torchtune does per layer),
done without a change to the script. The compiler still chooses, per block graph, what its backward recomputes (its
activation memory budget applies to each graph).

``compile:whole`` leaves torch.compile's graphs as the script made them; so does a function (not a module) given to
torch.compile, and ``fullgraph=True`` (where a graph break is an error). Either way the first call of torch.compile
pushes the mover's saved-tensor hooks again through ``torch.compiler.disable``: between graphs a compiled module
runs eager code under Dynamo's frame hook, and Dynamo traced the pack hook there (HF GPT-2's final layer norm, with
a graph per block) and failed inside it. Eager code without compile keeps the bare hooks, whose host time matters
(the wrapper's costs at every pack and unpack). Measured: see docs/run.md, "Under torch.compile".
"""

from __future__ import annotations

import functools
import weakref

from tierpack.module_recompute import find_blocks


class CompileSplit:
    """torch.compile wrapped: the modules given to it break Dynamo's graph before each block (with `split`), and
    `on_compile` runs at each call (the mover's shield_from_compiler)."""

    def __init__(self, torch, log=None, split=True, on_compile=None):
        self.torch = torch
        self.log = log or (lambda *a: None)
        self.split = split
        self.on_compile = on_compile
        dynamo = getattr(torch, "_dynamo", None)
        self._graph_break = getattr(dynamo, "graph_break", None)
        self._compiling = getattr(getattr(torch, "compiler", None), "is_compiling", None)
        self._roots = weakref.WeakSet()  # the modules whose blocks break the graph
        self._handles = []
        self._compile = None             # torch.compile as it was

    def available(self):
        """Whether this torch has torch.compile and the pieces the split needs (torch 2)."""
        return None not in (getattr(self.torch, "compile", None), self._graph_break, self._compiling)

    def install(self):
        """Wraps torch.compile (once); False without torch 2."""
        if not self.available() or self._compile is not None:
            return self._compile is not None
        torch, original = self.torch, self.torch.compile

        @functools.wraps(original)
        def compile(model=None, *args, **kwargs):
            if self.on_compile is not None:
                self.on_compile()
            root = model if isinstance(model, torch.nn.Module) else getattr(model, "__self__", None)
            if self.split and isinstance(root, torch.nn.Module):  # model.compile() gives its bound _call_impl
                if kwargs.get("fullgraph"):  # a graph break would be an error there
                    self.log("compile:blocks: %s is compiled with fullgraph=True: one graph, as the script asks "
                             "(Note [Compile per block])" % type(root).__name__)
                else:
                    self.split_blocks(root)
            return original(model, *args, **kwargs)

        self._compile = original
        torch.compile = compile
        return True

    def split_blocks(self, root):
        """Breaks Dynamo's graph before each block of `root` (Note [Compile per block]); returns how many blocks."""
        if root in self._roots:
            return 0
        self._roots.add(root)
        blocks = find_blocks(self.torch, root)
        for b in blocks:
            self._handles.append(b.register_forward_pre_hook(self._break))
        name = type(root).__name__
        if blocks:
            self.log("compile:blocks: torch.compile's graph of %s breaks before each of its %d %s blocks: one "
                     "compiled graph and backward per block (Note [Compile per block]; compile:whole keeps the script's "
                     "graphs)" % (name, len(blocks), type(blocks[0]).__name__))
        else:
            self.log("compile:blocks: %s has no repeated blocks: compiled as the script made it" % name)
        return len(blocks)

    def _break(self, module, args):
        if self._compiling():
            self._graph_break()
        return None

    def remove(self):
        """The hooks off, and torch.compile as it was."""
        for h in self._handles:
            h.remove()
        self._handles = []
        if self._compile is not None:
            self.torch.compile, self._compile = self._compile, None
