"""Recipes: how the storage mover makes a saved storage again on the device instead of copying it out and back.

Plain functions of the autograd graph and of what the hooks packed this iteration: the mover (activations.py)
calls find_recipe at a storage's first pack and runs the recipe at its use (StorageMover._remake); cast_parameter
also tells it which saved storages autocast's cache holds. What a module's forward saved is made again by running
the module (module_recompute.py). Whether the plan makes a storage again or copies it is the placer's choice
(placer/saved_plan.cpp, Note [Recompute cost]); what the recipes cost is measured in measured_plans.py (Note
[Measured recomputation]).

Note [Recipes]
~~~~~~~~~~~~~~
Some saved storages can be made again at their use instead of copied (placer/saved_plan.cpp, Note
[Recompute]). At its first pack the mover looks at the op that made the saved tensor (its grad_fn, before
the hook detaches it) and keeps a recipe when the result is exactly reproducible from what stays on the
device anyway:

* the output of GELU or SiLU (the whole storage) from its input, which autograd keeps for the
  activation's own backward: the input's own pack (a storage with a record, found through the grad_fn's
  next function, the op that made the input) hands the recipe the very tensor autograd saved; likewise
  the product of two such saved tensors of its shape (``MulBackward0``: SwiGLU's silu(gate) * up);
* autocast's copy of a parameter (``ToCopyBackward0`` over the parameter's ``AccumulateGrad``, seen
  through view ops such as the transpose a linear layer saves): ``parameter.to(dtype)``.

Each is also found through up to three view ops: a linear layer over 3-D input saves a 2-D view of it,
so GPT-2's GELU outputs and SwiGLU's products reach the hook as views (none was made again without
this: bench/results/gpu-h200-2026-12-01-3, call 1); a recipe makes the whole storage and each saved view
is rebuilt over it. A recipe may read a storage that was itself let go to be made again (SwiGLU's product
from silu(gate), itself made from gate): that input is made first, at the product's use, and stays until
its own (the plan counts it back from there: placer/saved_plan.cpp, Note [Recompute]). autocast keeps its casts of parameters in a cache until its region exits: such a
storage is ``held_in_forward`` in the recorded iteration, and the plan lets it go no earlier than
backward's first call (letting it go in forward freed nothing: GPT-2 large's live peak passed the plan
by the casts' 1.2-1.4 GiB). If backward runs inside the region (the cache lives on), casts never move.

The same kernel on the same bytes gives the same bytes, so gradients stay bit-identical. A recipe checks
the version counter of what it reads: an input or parameter changed in place since the pack raises an
error rather than making a different tensor. The recorded iteration gives each such storage
``recompute_ms`` (bytes read and written at ``recompute_bytes_per_s``, an estimate: 2e12 B/s, under an
H200's HBM) and the storages it reads (``recompute_from``); in planned iterations a storage the plan
remakes is let go without a copy and made on the compute stream at its first unpack (or a reader's, in a
chain). Dropout (its RNG state) is not made again. What small leaf modules save (normalisations, activations
written as Python arithmetic) is made again by running the module again: Note [Module recompute] in
module_recompute.py.
"""

from __future__ import annotations

from tierpack._storage import on_storage as _on_storage
from tierpack._storage import resident
from tierpack._storage import through_views as _through_views
from tierpack._storage import untyped as _untyped


def _checked(t, version, what):
    if t is None or t._version != version:
        raise RuntimeError("tierpack: cannot make a saved tensor again: %s changed in place after it was saved "
                           "(Note [Recipes]; TIERPACK_GPU recompute:off avoids this)" % what)
    return t


def _saved_input(torch, src, device, remake=None):
    """() -> the tensor a recipe reads: what autograd saved (its version checked), or the same view rebuilt on
    the input's storage once that handle was handed out (autograd's own saved copy still checks it), or made
    again first when the input was let go to be made again itself (a chain: remake(record) -> tensor)."""
    rec_in, h_in = src
    version = h_in.version

    def the_input():
        if h_in.t is not None:
            return _checked(h_in.t, version, "a recipe's input")
        st = resident(rec_in)
        if st is None and remake is not None and rec_in.released:
            made = remake(rec_in)
            st = _untyped(made) if made is not None else None
        if st is None:
            raise RuntimeError("tierpack: cannot make a saved tensor again: its input left the device (Note [Recipes])")
        return _on_storage(torch, st, h_in.dtype, device, h_in.offset, h_in.size, h_in.stride)
    return the_input


def cast_parameter(node):
    """The parameter whose autocast cast (``ToCopyBackward0`` over its ``AccumulateGrad``) the node made,
    seen through views, or None."""
    node = _through_views(node)
    if node is None or type(node).__name__ != "ToCopyBackward0" or not node.next_functions:
        return None
    return getattr(node.next_functions[0][0], "variable", None)


def _contiguous(size, stride):
    """Whether a view of this size and stride is the row-major layout of its elements (dimensions of 1 aside)."""
    expected = 1
    for d, st in zip(reversed(size), reversed(stride)):
        if d != 1 and st != expected:
            return False
        expected *= d
    return True


def _numel(size):
    n = 1
    for d in size:
        n *= d
    return n


def find_recipe(torch, node, t, storage, made_by, remake=None):
    """Note [Recipes]: (make, storages read, bytes read) for the saved tensor `t` made by the autograd node
    `node`, or None. made_by: autograd node -> (record, handle) of a storage packed this iteration; remake:
    makes a let-go input again (a chain)."""
    # an op's own output, the whole storage (what a recipe makes anew), saved as itself or as a view of it
    # (the same storage: a recipe makes the storage, and each saved use is rebuilt over it)
    whole = t.storage_offset() == 0 and t.is_contiguous() and t.numel() * t.element_size() == storage.nbytes()
    made = _through_views(node)
    name = type(made).__name__
    if name == "MulBackward0" and len(made.next_functions) == 2:
        # a product of two saved activations of one shape and its size (SwiGLU's silu(gate) * up)
        srcs = [made_by.get(n) for n, _ in made.next_functions]
        # (an input let go by a reactive move in the recorded iteration still names its storage)
        if not whole or any(src is None or src[1].dtype != t.dtype or
                            tuple(src[1].size) != tuple(srcs[0][1].size) or _numel(src[1].size) != t.numel() or
                            not _contiguous(src[1].size, src[1].stride) for src in srcs):
            return None
        a, b = (_saved_input(torch, src, t.device, remake) for src in srcs)
        return (lambda: a() * b()), [src[0].index for src in srcs], 2 * storage.nbytes()
    if name in ("GeluBackward0", "SiluBackward0"):
        node = made
        if not whole:
            return None
        src = made_by.get(node.next_functions[0][0]) if node.next_functions else None
        if src is None:
            return None
        rec_in, h_in = src
        if h_in.dtype != t.dtype or _numel(h_in.size) != t.numel() or not _contiguous(h_in.size, h_in.stride):
            return None
        the_input = _saved_input(torch, src, t.device, remake)
        F = torch.nn.functional
        if name == "GeluBackward0":
            approximate = getattr(node, "_saved_approximate", "none")
            make = lambda: F.gelu(the_input(), approximate=approximate)  # noqa: E731
        else:
            make = lambda: F.silu(the_input())  # noqa: E731
        return make, [rec_in.index], storage.nbytes()
    param = cast_parameter(node)
    if (param is None or param.device != t.device or not param.is_contiguous() or
            param.numel() * t.element_size() != storage.nbytes()):
        return None
    dtype, version = t.dtype, param._version
    return (lambda: _checked(param, version, "a parameter").detach().to(dtype)), [], param.numel() * param.element_size()
