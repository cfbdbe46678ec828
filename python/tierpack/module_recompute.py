"""Saved storages made again by running a module's forward again (python/tierpack/activations.py's mover).

Note [Module recompute]
~~~~~~~~~~~~~~~~~~~~~~~
Op recipes (Note [Recipes]) know a few autograd nodes. Models written as Python arithmetic save tensors no
node reveals a recipe for: transformers' ``NewGELUActivation`` (GPT-2, T5 v1.1) is
``0.5 * x * (1 + tanh(c * (x + 0.044715 * x**3))))``; autograd keeps three intermediates of x's size and its
``AddBackward0`` does not even keep the scalar of ``1 + t``. So nothing was made again on T5 or on Hugging
Face's GPT-2 (bench/results/gpu-h200-2026-12-02, call 4). What every such op shares is the module that ran
it. As non-reentrant checkpointing does for a region, the mover runs the module's ``forward`` again on the
same inputs and takes the tensors it saves, in the order it saves them:

* which modules: leaf modules (no children) whose parameters are at most 1-D (activations, LayerNorm,
  RMSNorm, T5's layer norm; never a matmul or a convolution: making those again costs what a copy saves)
  and which hold no buffers (BatchNorm's running statistics would be updated twice), called with exactly
  the positional arguments their ``forward`` takes (the global module hooks see no keyword arguments);
* a call of such a module in forward (module hooks, on the thread that installed the pack hooks) counts
  every pack while it runs. A storage first saved there is the call's *member*; one that is an input's
  storage is an *input*; any other storage saved before the call makes the call ineligible (the module
  read something that is not an argument). The module's output, saved later by the next op, is a member
  too (its storage is recognised at its first pack while the output is alive);
* every tensor argument is a saved storage (its record: the plan keeps it where a member is made again,
  placer/saved_plan.cpp Note [Recompute]), or is *held* by the call: a small one, a parameter, or one that
  nothing saves (under autocast, NewGELU's input: ``pow`` saves its float32 copy; the residual stream into
  a Llama RMSNorm) when the call's members are at least twice its bytes (NewGELU: about 7 times). A held
  input stays on the device from the call to the first use of a member, where the call runs again: in the
  recorded iteration it is held just as long, so the trace's live bytes count it; in a planned iteration
  only calls with a member the plan makes again hold it (a call is known across iterations by its module
  and how many times that module ran before it in the iteration);
* the output's cast: autocast casts the output for the next matmul (NewGELU's float32 output to bfloat16
  for GPT-2's ``c_proj``) and only the cast is saved; a first pack made by ``ToCopyBackward0`` (through
  views) from the output's autograd node is a member too, made as ``output.to(dtype)``;
* in the recorded iteration each call is run again at once, on inputs rebuilt from those records under
  the autocast state of the call, with the RNG state restored afterwards, and every member and the output
  must come out bit for bit equal and the same number of tensors must be saved; else the module is never
  made again (dropout draws other numbers, an in-place ReLU changed its input). That run's GPU time is
  every member's ``recompute_ms``, and the members share a ``recompute_group`` (the call's number in the
  iteration): making one member or all of them at one point is one run, and the planner counts it once
  there (placer/saved_plan.cpp, Note [Recompute cost]; shared by bytes, a plan that made one member again
  was charged a fraction of the run it cost). A member's ``recompute_from`` is the call's inputs and the
  members saved before it, so the first member used in backward makes the others with it (the planner's
  chain, Note [Recompute]). The live peak of that check is left out of the trace;
* in a planned iteration a member the plan makes again is let go without a copy; at its use (or a
  reader's) the call runs again once, every member let go takes its storage from that run (the rest of
  the run is dropped), and the inputs the call held since its first member was let go are released. An
  input changed in place since the call raises an error rather than making another tensor.

Deterministic kernels give the same bytes on the same inputs, so gradients stay bit-identical. Under
``torch.compile`` the hooks do nothing inside compiled code: the compiler owns recomputation there.

Note [Block recompute]
~~~~~~~~~~~~~~~~~~~~~~
Leaf modules and op recipes make again what is cheap (activations, norms); a transformer's matmul outputs and a
CNN's convolution outputs are most of its saved bytes and only copies could take them away, over a link that
carries 55 GB/s each way. Activation checkpointing runs a whole layer again instead; so does the mover, where the
planner finds it cheaper than copies (placer/saved_plan.cpp, Note [Block recompute]):

* which modules: at the recorded iteration's first module call (a root), its ``ModuleList`` and ``Sequential``
  containers are looked through; a child with at least one sibling of the same type, children of its own and a
  parameter of two or more dimensions is a *block* (GPT-2's ``GPT2Block``, ``LlamaDecoderLayer``, ``T5Block``,
  torchvision's ``Bottleneck``), the innermost only: a ResNet written as one ``Sequential`` of its stages has
  the stages and their bottlenecks as blocks, and a bottleneck lets a plan run again a sixteenth of the network
  where a stage holds a quarter of its activations at once (ResNet-50 at checkpointing's peak: 63.3 ms a step
  with bottlenecks, 65.5 with stages; at 60% of that peak neither helped, 266-268 ms:
  bench/results/gpu-h200-2026-12-03-1, calls 1-2). Blocks get their own forward hooks, which see keyword
  arguments (torch 2; before 2.0 a call with exactly the positional arguments forward takes, as for leaves);
* a block's call records its arguments as a leaf call does (saved storages, held inputs, plain values, tuples of
  them); an argument of another type (a key-value cache object, which a second run would change) makes the
  block never run again. Every storage first saved while it runs is its member (an autocast cast of a
  parameter is not: autocast's cache holds it); a storage saved there that is neither a member nor an
  argument nor a parameter makes the call ineligible. The RNG state at its start is kept (dropout draws the
  same numbers again), and a run again puts its buffers back as they were (BatchNorm's running statistics are
  updated once, as without tierpack);
* in the recorded iteration each call is run again at once and every member compared bit for bit (one already
  copied out by the warm-up's reactive moves with its copy); the run's GPU time is the block's ``ms``, its
  saved inputs its ``from`` (the trace's ``blocks``; each member names its block);
* in a planned iteration only the calls whose members the plan makes by their block are followed; those members
  are let go without a copy once the call has returned, and the first of them used in backward runs the block
  again, which hands every one of them its storage (the leaf calls' machinery: ``make``). An input the plan copied
  out is fetched by then and read once its copy has landed (placer/saved_plan.cpp, Note [Block inputs]); what the
  check run allocated beyond the members is the block's ``extra_bytes`` (Note [Block run memory] there).

Measured on the H200 (bench/results/gpu-h200-2026-12-02-4, calls 2-4): ResNet-50 at checkpointing's peak
went from 89.3 to 65.4 ms a step (0.83x checkpointing's 78.8 ms), and at 75% of its peak from 136.7 to 65.4 ms;
the Llama-style decoder at checkpointing's peak from 326.6 to 221.9 ms, GPT-2 large there from 684.8 to 331.6
ms (call 2) and 373.4 ms (call 4, after the soft limit's replans). T5's blocks are called with an
``EncoderDecoderCache``: not run again.

Note [Holds]
~~~~~~~~~~~~
A call that holds an input nothing saves (Note [Module recompute]) holds it in the recorded iteration from its end
to the first use of a member, so the trace's live bytes count it: right for a plan that makes that call's members
again (a planned iteration holds it just as long), too many bytes for one that does not (nothing is held then).
On Hugging Face GPT-2 large every ``NewGELUActivation`` call holds its 80 MiB bfloat16 input until backward: the
recorded live peak was 47.18 GiB where the iterations without tierpack's moves peaked at 44.37 GiB (36 x 80 MiB =
2.81 GiB), and at 100% of the default peak the plan copied 3.2 GiB each way, 1.05-1.11x the default step
(bench/results/gpu-h200-2026-12-11-1, calls 1-2). So the recorded iteration also counts, at every call, the bytes
the calls hold that nothing else holds (``held_now``: a storage whose only holders are the held tensor and the
storage object asked, where torch can count a storage's holders, ``torch._C._storage_Use_Count``; every held
input where it cannot), and the storages those calls make (``holding_members``). A plan is made first from the
trace less those bytes (planning.py); it stands if it makes none of those storages again, since then nothing is
held and that trace is exact. Otherwise the plan comes from the whole trace, as before.
"""

from __future__ import annotations

import inspect
import threading
import weakref
from time import perf_counter as _clock

from tierpack._storage import VIEW_OPS, autocast_state_getter, flat_bytes, on_storage, resident, storage_getter, \
    through_views

OUTPUT = 1 << 62  # the pack position of the module's output (saved after the call by the next op)
CAST = OUTPUT + 1  # ... and of the output's cast (autocast's, for the next op)
HOLD_RATIO = 2     # a call holds inputs nothing saves only when its members are at least this many times their bytes


def _flatten_specs(specs):
    """The argument specs of ModuleRecompute._input, tuples and lists looked through."""
    for a in specs:
        if a[0] == "seq":
            yield from _flatten_specs(a[2])
        else:
            yield a


def _positional_arity(module):
    """How many positional arguments forward takes when it takes nothing else, or -1: a call with exactly that
    many arguments passed no keyword argument (the global hooks do not see them)."""
    try:
        params = list(inspect.signature(module.forward).parameters.values())
    except (TypeError, ValueError):
        return -1
    kinds = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    return len(params) if all(p.kind in kinds for p in params) else -1


def _tensors(args, kwargs=None):
    """The tensors among a call's arguments (and in their tuples and lists), in a stable order."""
    out = []
    for a in list(args) + ([kwargs[k] for k in sorted(kwargs)] if kwargs else []):
        if isinstance(a, (tuple, list)):
            out.extend(x for x in a if hasattr(x, "_version"))
        elif hasattr(a, "_version"):
            out.append(a)
    return out


_PLAIN = (type(None), bool, int, float, str)


def find_blocks(torch, root):
    """Note [Block recompute]: the modules of `root` that are blocks -- children of a ModuleList or Sequential
    with at least one sibling of the same type, with children of their own and a parameter of 2 or more
    dimensions (a matmul or a convolution) -- the innermost of them (none holds another)."""
    found = []
    for mod in root.modules():
        if not isinstance(mod, (torch.nn.ModuleList, torch.nn.Sequential)):
            continue
        by_type = {}
        for kid in mod.children():
            by_type.setdefault(type(kid), []).append(kid)
        for kids in by_type.values():
            if len(kids) >= 2 and next(kids[0].children(), None) is not None and \
                    any(p.dim() >= 2 for p in kids[0].parameters()):
                found.extend(kids)
    ids = {id(b) for b in found}
    return [b for b in found if not any(id(m) in ids for m in b.modules() if m is not b)]


def _leaf_kind(module):
    """Whether the module may be run again at all (Note [Module recompute]): a leaf, parameters at most 1-D,
    no buffers."""
    if next(module.children(), None) is not None or next(module.buffers(recurse=False), None) is not None:
        return False
    return all(p.dim() <= 1 for p in module.parameters(recurse=False))


class ModuleCall:
    """One call of a leaf module in forward: what it saved, from what, and how to run it again."""

    __slots__ = ("module", "key", "count", "members", "member_ids", "input_keys", "inputs", "reads", "autocast", "ok",
                 "out_ref", "out_key", "out_node", "casts", "versions", "marks", "held", "why", "holds", "kw_inputs",
                 "rng", "block", "deferred", "host_ms", "extra", "hold_bytes")

    def __init__(self, module, key, args, autocast, kwargs=None, rng=None):
        self.block = kwargs is not None  # a block's call (Note [Block recompute]): keyword arguments, RNG state
        self.kw_inputs = None     # per keyword argument, as inputs (blocks)
        self.rng = rng            # the RNG state at its start (blocks: dropout draws the same numbers again)
        self.deferred = None      # members let go before the call returned: let go once it has (blocks)
        self.module = module
        self.key = key            # (id(module), how many calls of it came before in the iteration)
        self.casts = {}           # member index -> dtype of a cast of the output
        self.out_node = None
        self.holds = False        # holds inputs nothing saves (("held", tensor) in inputs)
        self.count = 0            # packs while it ran (every saved tensor, small ones too)
        self.members = []         # (pack position or OUTPUT, record) of storages first saved by it
        self.member_ids = set()
        self.input_keys = {}      # storage key -> argument position, for its tensor arguments
        self.inputs = None        # per argument: ("rec", record, view) or ("val", object); set when it returns
        self.reads = []           # storage indices a member is made from (its inputs; for _needed)
        self.autocast = autocast
        self.ok = True
        self.out_ref = None
        self.out_key = None
        self.versions = [getattr(a, "_version", None) for a in _tensors(args, kwargs)]
        self.marks = None         # (start, end) of its check run (recorded iteration): recompute_ms
        self.host_ms = 0.0        # the host time of that run (blocks: Note [Host time] in placer/saved_plan.cpp)
        self.extra = 0            # live bytes that run added beyond its members (Note [Block run memory] there)
        self.held = None          # the input storages, held once a member was let go to be made again
        self.hold_bytes = 0       # recorded iteration: the bytes of the inputs nothing saves it held (Note [Holds])
        self.why = ""

    def changed(self, args, kwargs=None):
        """Whether a tensor argument was changed in place since the call began."""
        return any(getattr(a, "_version", None) != v for a, v in zip(_tensors(args, kwargs), self.versions))


class ModuleRecompute:
    """The module hooks and per-call bookkeeping for one StorageMover (Note [Module recompute])."""

    def __init__(self, mover):
        self.mover = mover
        self.torch = mover.torch
        self.ok = weakref.WeakKeyDictionary()      # module -> every checked call matched (recorded iteration)
        self._kind = weakref.WeakKeyDictionary()   # module -> _leaf_kind(module)
        self.verdicts = {}  # module type name -> "" (made again) or why not: the recorded iteration's, logged
        self._arity = {}    # module type -> _positional_arity
        self.recorded_members = {}  # call key -> member indices, from the recorded iteration
        # Note [Block recompute]
        self.block_ok = weakref.WeakKeyDictionary()  # block module -> every checked call matched
        self.block_verdicts = {}     # block type name -> [calls that qualified, calls, why the others did not]
        self.recorded_blocks = {}    # block call key -> member indices, from the recorded iteration
        self.planned_blocks = frozenset()  # keys of the block calls the plan in force runs again
        self._scanned = weakref.WeakKeyDictionary()  # root modules looked through for blocks
        self._block_hooks = []
        self._rerunning = False      # a call runs again now: its modules' calls are not followed
        self.thread = None
        # Under torch.compile the compiler owns recomputation: a traced hook does nothing (Note [Module recompute])
        compiler = getattr(self.torch, "compiler", None)
        self._compiling = getattr(compiler, "is_compiling", None) or (lambda: False)
        self._autocast_state = autocast_state_getter(self.torch, mover.device_type)  # () -> (enabled, dtype, cache)
        self._storage_of = storage_getter(self.torch)
        self.begin_iteration()

    # --------------------------------------------------------------------------------- iterations
    def begin_iteration(self):
        self.frame = None       # the call running now
        self.calls = []         # this iteration's calls with members
        self.pending_out = {}   # output storage key -> call (its output not yet saved)
        self.pending_node = {}  # the output's autograd node -> call (a cast of it not yet saved)
        self.member_call = {}   # member index -> call (recorded iteration: its first use ends its holds)
        self.seen_calls = {}    # id(module) -> calls of it so far in this iteration
        self.block = None       # the block call running now (Note [Block recompute])
        self.blocks = []        # this iteration's block calls with members
        self.seen_blocks = {}   # id(block) -> calls of it so far in this iteration
        self.depth = 0          # recorded iteration: module calls open now (depth 0: a root, looked through)
        self.holding = []       # recorded iteration: the calls that held inputs nothing saves (Note [Holds])
        m = self.mover
        recording = getattr(m, "_recording", False)
        if recording:
            self.recorded_members = {}
            self.recorded_blocks = {}
        # What watching() asks that stays the same through an iteration (the plan changes only between them),
        # read once: the module hooks run at every module call (Note [Storage moves], the hooks' host time).
        self._watch = m.recompute and not m._idle and (recording or (m.plan is not None and bool(m._remade)))

    def watching(self):
        """Whether calls are followed now: in the recorded iteration, or a planned one that makes members again
        (until it diverges; the recorded iteration has no plan to diverge from)."""
        m = self.mover
        return self._watch and not m._diverged and m.device is not None and threading.get_ident() == self.thread

    # --------------------------------------------------------------------------------- hooks
    def install(self):
        """Global forward hooks (every module); returns their handles."""
        from torch.nn.modules import module as mm

        self.thread = threading.get_ident()
        return [mm.register_module_forward_pre_hook(self._pre), mm.register_module_forward_hook(self._post)]

    def _pre(self, module, args):
        if self._compiling() or self._rerunning:  # traced by torch.compile: nothing here (checked first)
            return None
        self.frame = None  # a leaf call never nests: one left open ended with an exception
        if not self.watching() or self.mover._in_backward():
            return None
        if self.mover._recording:
            if self.depth == 0 and module not in self._scanned:
                self._scan(module)
            self.depth += 1
        kind = self._kind.get(module)
        if kind is None:
            kind = self._kind[module] = _leaf_kind(module)
        if not kind or self.ok.get(module, self.mover._recording) is False:
            return None
        torch = self.torch
        arity = self._arity.get(type(module))
        if arity is None:
            arity = self._arity[type(module)] = _positional_arity(module)
        if arity != len(args) or not torch.is_grad_enabled():
            return None
        n = self.seen_calls.get(id(module), 0)
        self.seen_calls[id(module)] = n + 1
        call = ModuleCall(module, (id(module), n), args, self._autocast_state())
        storage_of = self._storage_of
        for i, a in enumerate(args):
            if isinstance(a, torch.Tensor):
                call.input_keys.setdefault(storage_of(a).data_ptr(), i)
        self.frame = call
        return None

    def _post(self, module, args, output):
        if self._compiling() or self._rerunning:
            return None
        if self.depth > 0 and self.mover._recording:
            self.depth -= 1
        call = self.frame
        if call is None or call.module is not module:
            return None
        self.frame = None
        with self.mover._lock:
            self._finish_call(call, args, output)
        return None

    # --------------------------------------------------------------------------------- blocks
    def _scan(self, root):
        """Recorded iteration: the blocks of a module called at depth 0 get hooks that see keyword arguments
        (the global ones do not: Note [Block recompute])."""
        self._scanned[root] = True
        if not self.mover.recompute_blocks:
            return
        for b in find_blocks(self.torch, root):
            if b in self.block_ok:
                continue
            self.block_ok[b] = None
            try:
                self._block_hooks.append(b.register_forward_pre_hook(self._block_pre, with_kwargs=True))
                self._block_hooks.append(b.register_forward_hook(self._block_post, with_kwargs=True))
            except TypeError:  # torch before 2.0: hooks see positional arguments only (Note [Module recompute])
                arity = _positional_arity(b)
                self._block_hooks.append(b.register_forward_pre_hook(
                    lambda m, args, n=arity: self._block_pre(m, args, {}) if len(args) == n else None))
                self._block_hooks.append(b.register_forward_hook(
                    lambda m, args, out: self._block_post(m, args, {}, out)))

    def _block_pre(self, module, args, kwargs):
        if self._compiling() or self._rerunning:
            return None
        self.block = None  # blocks never nest (the innermost are hooked): one left open ended with an exception
        m = self.mover
        if not self.watching() or m._in_backward() or self.block_ok.get(module) is False or \
                not self.torch.is_grad_enabled():
            return None
        n = self.seen_blocks.get(id(module), 0)
        self.seen_blocks[id(module)] = n + 1
        key = (id(module), n)
        if not m._recording and key not in self.planned_blocks:
            return None
        for a in list(args) + list(kwargs.values()):
            items = a if isinstance(a, (tuple, list)) else (a,)
            odd = next((x for x in items if not isinstance(x, _PLAIN + (self.torch.Tensor, self.torch.dtype))), None)
            if odd is not None:
                if m._recording:
                    self.block_ok[module] = False  # a cache object: running it again would change it
                    self._block_verdict(module, "an argument of type %s" % type(odd).__name__)
                return None
        call = ModuleCall(module, key, args, self._autocast_state(), kwargs, self._rng_state())
        storage_of = self._storage_of
        for i, a in enumerate(_tensors(args, kwargs)):
            call.input_keys.setdefault(storage_of(a).data_ptr(), i)
        self.block = call
        return None

    def _block_post(self, module, args, kwargs, output):
        if self._compiling() or self._rerunning:
            return None
        call = self.block
        if call is None or call.module is not module:
            return None
        self.block = None
        with self.mover._lock:
            self._finish_block(call, args, kwargs)
        return None

    def _block_verdict(self, module, why):
        v = self.block_verdicts.setdefault(type(module).__name__, [0, 0, ""])
        v[0] += 0 if why else 1
        v[1] += 1
        v[2] = why or v[2]

    def on_pack_block(self, rec, first, movable):
        """At a pack inside a block's call (under the mover's lock): the block call if rec is its member."""
        call = self.block
        key = rec.key
        if key in call.input_keys:
            return None
        if first and movable and not rec.held:
            call.members.append((call.count - 1, rec))
            call.member_ids.add(rec.index)
            return call
        if rec.index not in call.member_ids and not rec.held and key not in self.mover._parameters:
            call.ok, call.why = False, "it saved a storage that is not its argument"
        return None

    def _finish_block(self, call, args, kwargs):
        mover = self.mover
        if call.changed(args, kwargs):
            call.ok, call.why = False, "it changed an input in place"
        held = 0
        call.inputs = []
        for a in args:
            spec, h = self._input(call, a)
            call.inputs.append(spec)
            held += h
        call.kw_inputs = {}
        for k, a in kwargs.items():
            spec, h = self._input(call, a)
            call.kw_inputs[k] = spec
            held += h
        members = sum(m.nbytes for _, m in call.members)
        if held and mover._recording and members < HOLD_RATIO * held:
            call.ok, call.why = False, "inputs of %d bytes that nothing saves, for %d bytes saved" % (held, members)
        call.holds = bool(held) and call.ok
        if mover._recording and call.holds:  # Note [Holds]
            call.hold_bytes = held
            self.holding.append(call)
        if mover._recording and call.ok and call.members:
            self._check(call, None)
        if mover._recording:
            self._block_verdict(call.module, "" if call.ok else call.why)
            if not call.ok and call.why:
                self.block_ok[call.module] = False
            elif call.ok and call.members:
                self.block_ok[call.module] = True
                self.recorded_blocks[call.key] = {m.index for _, m in call.members}
        if not call.ok:
            call.inputs = call.kw_inputs = None
            if not mover._recording:
                self._disown(call)
            return
        if call.members:
            self.blocks.append(call)
        for rec in call.deferred or ():  # let go while it ran: now its inputs are known (Note [Block recompute])
            mover._let_go_to_remake(rec)
        call.deferred = None

    # --------------------------------------------------------------------------------- packs
    def on_pack(self, rec, first, movable):
        """At a pack with a record (under the mover's lock): returns the call the record is a member of, or
        None. The running call counts packs in count_pack()."""
        call = self.frame
        if call is not None:
            key = rec.key
            if key in call.input_keys:
                return None
            if first and movable:
                return self._attach(call, call.count - 1, rec)
            if rec.index not in call.member_ids:
                call.ok, call.why = False, "it saved a storage that is not its argument"
            return None
        if first and movable and self.pending_out:
            call = self.pending_out.pop(rec.key, None)
            out = call.out_ref() if call is not None else None
            if out is not None and self._storage_of(out).data_ptr() == rec.key:
                return self._attach(call, OUTPUT, rec)
        return None

    def on_cast(self, rec, node, t):
        """At the first pack of a storage made by autocast's cast (``ToCopyBackward0``) of a call's output:
        returns the call (the cast is a member), or None."""
        name = type(node).__name__
        if name != "ToCopyBackward0" and name not in VIEW_OPS:
            return None
        node = through_views(node)
        if node is None or type(node).__name__ != "ToCopyBackward0" or not node.next_functions:
            return None
        call = self.pending_node.get(through_views(node.next_functions[0][0]))
        out = call.out_ref() if call is not None else None
        if (out is None or not out.is_contiguous() or out.numel() != t.numel() or t.storage_offset() != 0 or
                not t.is_contiguous() or t.numel() * t.element_size() != rec.nbytes):
            return None
        if self.mover._recording and not self._same(rec.storage, self._storage_of(out.to(t.dtype))):
            return None
        call.casts[rec.index] = t.dtype
        return self._attach(call, CAST, rec)

    def _attach(self, call, pos, rec):
        call.members.append((pos, rec))
        call.member_ids.add(rec.index)
        self.member_call[rec.index] = call
        if self.mover._recording:
            self.recorded_members.setdefault(call.key, set()).add(rec.index)
        return call

    def on_unpack(self, rec):
        """Recorded iteration: a member's first use ends its call's holds (where a planned iteration runs the
        call again)."""
        call = self.member_call.pop(rec.index, None)
        if call is not None and call.holds and call.inputs:
            call.inputs = [("gone",) if a[0] == "held" else a for a in call.inputs]
            call.holds = False

    def count_pack(self):
        if self.frame is not None:
            self.frame.count += 1
        if self.block is not None:
            self.block.count += 1

    def recipe(self, call, rec):
        """The recipe (make, storages read, bytes read, call) of a member the plan makes again."""
        return (lambda: self.make(call, rec)), call.reads, 0, call

    # --------------------------------------------------------------------------------- calls
    def _finish_call(self, call, args, output):
        torch, mover = self.torch, self.mover
        if call.changed(args):
            call.ok, call.why = False, "it changed an input in place"
        inputs, held, storage_of = [], 0, self._storage_of
        for a in args:
            spec, h = self._input(call, a)
            inputs.append(spec)
            held += h
        members = sum(m.nbytes for _, m in call.members)
        if held and mover._recording and members < HOLD_RATIO * held:
            call.ok, call.why = False, "an input of %d bytes that nothing saves, for %d bytes saved" % (held, members)
        elif held and not mover._recording and not (self.recorded_members.get(call.key, ()) & mover._remade):
            call.ok = False  # no member of it is made again: holding its input would cost memory for nothing
        # (a planned iteration holds what a member the plan makes again needs, whatever the sizes are now)
        call.inputs = inputs
        call.holds = bool(held) and call.ok
        if mover._recording and call.holds:  # Note [Holds]
            call.hold_bytes = held
            self.holding.append(call)
        # The next op saves the output (or its cast) right away if at all: a later call's output replaces it,
        # so a pack looks at no more than one call's output (the hooks' host time: Note [Storage moves]).
        self.pending_out.clear()
        self.pending_node.clear()
        if isinstance(output, torch.Tensor) and call.ok:
            key = storage_of(output).data_ptr()
            if key not in call.input_keys and mover._records.get(key) is None:
                call.out_ref, call.out_key = weakref.ref(output), key
                self.pending_out[key] = call
                if output.grad_fn is not None:
                    call.out_node = output.grad_fn
                    self.pending_node[output.grad_fn] = call
        if mover._recording and call.ok:
            self._check(call, output)
        if mover._recording:
            name = type(call.module).__name__
            if not call.ok or name not in self.verdicts:
                self.verdicts[name] = call.why if not call.ok else ""
            for _, m in call.members:
                self.recorded_members.setdefault(call.key, set()).add(m.index)
        if not call.ok:
            if mover._recording and call.why:
                self.ok[call.module] = False
            self.pending_out.pop(call.out_key, None)
            self.pending_node.pop(call.out_node, None)
            call.inputs = None
            if not mover._recording:
                self._disown(call)
            return
        if mover._recording:
            self.ok.setdefault(call.module, True)
        if call.members or call.out_ref is not None:
            self.calls.append(call)

    def _input(self, call, a):
        """How a call's argument is had again when it runs again, and the bytes it holds (Note [Module recompute]):
        ("val", a), ("rec", record, view) of a saved storage, ("held", tensor, ...) of one nothing saves, or
        ("seq", type, [specs]) of a tuple or list."""
        torch, mover = self.torch, self.mover
        if isinstance(a, (tuple, list)) and any(isinstance(x, torch.Tensor) for x in a):
            specs = [self._input(call, x) for x in a]
            return ("seq", type(a), [sp for sp, _ in specs]), sum(h for _, h in specs)
        if not isinstance(a, torch.Tensor):
            return ("val", a), 0
        st = self._storage_of(a)
        rec = mover._records.get(st.data_ptr())
        if rec is not None and rec.tensor is None:
            if rec.index not in call.reads:
                call.reads.append(rec.index)
            return ("rec", rec, (a.dtype, tuple(a.shape), tuple(a.stride()), a.storage_offset(), a.requires_grad,
                                 a._version)), 0
        if st.nbytes() < mover.min_bytes or (a.is_leaf and a.requires_grad):
            return ("val", a), 0  # small, or a parameter: held as it is
        return ("held", a.detach(), a.requires_grad, a._version), st.nbytes()

    def _disown(self, call):
        """A planned iteration's call that cannot run again (it changed an input in place, or read a storage
        that is no argument, unlike in the recorded iteration): its members keep their storages. One already
        let go cannot be made: say so now rather than at its use."""
        for _, m in call.members:
            if m.recipe is not None and len(m.recipe) > 3 and m.recipe[3] is call:
                if m.released:
                    raise RuntimeError("tierpack: %s cannot run again in iteration %d (%s) and a storage it saved was "
                                       "let go to be made again (Note [Module recompute]; TIERPACK_GPU recompute:off "
                                       "avoids this)" % (type(call.module).__name__, self.mover.iteration, call.why))
                m.recipe = None

    def _arg(self, call, a):
        kind = a[0]
        if kind == "val":
            return a[1]
        if kind == "seq":
            return a[1](self._arg(call, x) for x in a[2])
        if kind == "held":
            t, requires_grad, version = a[1], a[2], a[3]
            if t._version != version:
                raise RuntimeError("tierpack: cannot make a saved tensor again: an input of %s changed in place "
                                   "after the call (Note [Module recompute])" % type(call.module).__name__)
            return t.detach().requires_grad_(requires_grad) if t.is_floating_point() else t
        if kind == "gone":
            raise RuntimeError("tierpack: cannot make a saved tensor again: the input %s held was let go "
                               "(Note [Module recompute])" % type(call.module).__name__)
        rec, (dtype, size, stride, offset, requires_grad, version) = a[1], a[2]
        torch, mover = self.torch, self.mover
        live = next((h.t for h in rec.handles if h.t is not None), None)
        if live is not None and live._version != version:
            raise RuntimeError("tierpack: cannot make a saved tensor again: an input of %s changed in place after "
                               "the call (Note [Module recompute]; TIERPACK_GPU recompute:off avoids this)"
                               % type(call.module).__name__)
        st = call.held.get(rec.index) if call.held else None
        if st is None and rec.moving and rec.released:
            # placer/saved_plan.cpp, Note [Block inputs]: an input the plan copied out comes back by this run (its
            # fetch was planned no later); the run reads it once its copy back has landed
            if rec.fetched is None:
                mover.counters.fetched_late += 1
                mover._fetch(rec)
            if rec.h2d is not None:
                mover._wait(rec.h2d, mover._events is not None)
        if st is None:
            st = resident(rec)
        if st is None and rec.released and rec.recipe is not None:
            made = mover._remake(rec)
            st = self._storage_of(made) if made is not None else None
        if st is None:
            raise RuntimeError("tierpack: cannot make a saved tensor again: an input of %s left the device "
                               "(Note [Module recompute])" % type(call.module).__name__)
        t = on_storage(torch, st, dtype, mover.device, offset, size, stride)
        return t.requires_grad_(requires_grad) if t.is_floating_point() or t.is_complex() else t

    def _run(self, call, keep=None):
        """The module's forward again: (saved tensors in order, output). A block's runs from the RNG state of
        its call, and its buffers (BatchNorm's running statistics) come out as they went in (Note [Block
        recompute]). keep: the positions to hold (None for the others: the run frees them as the forward goes on,
        as a forward frees what nothing saves); None: all."""
        torch = self.torch
        args = [self._arg(call, a) for a in call.inputs]
        kwargs = {k: self._arg(call, a) for k, a in call.kw_inputs.items()} if call.kw_inputs else {}
        saved = []

        def capture(t):
            if keep is not None and len(saved) not in keep:
                saved.append(None)  # (a member kept on the device, or copied out: its duplicate is not held)
                return None
            saved.append(t.detach() if t.grad_fn is not None else t)
            return None

        enabled, dtype, cache = call.autocast
        rng = buffers = None
        if call.rng is not None:
            rng = self._rng_state()
            self._set_rng_state(call.rng)
        if call.block:
            buffers = [(b, b.clone()) for b in call.module.buffers()]
        self._rerunning = True
        try:
            with torch.enable_grad(), torch.autocast(self.mover.device_type, dtype=dtype, enabled=enabled,
                                                     cache_enabled=cache), \
                    torch.autograd.graph.saved_tensors_hooks(capture, lambda _: None):
                out = call.module.forward(*args, **kwargs)
        finally:
            self._rerunning = False
            if rng is not None:
                self._set_rng_state(rng)
            with torch.no_grad():  # (BatchNorm's kernel updates its statistics without a version bump)
                for b, copy in buffers or ():
                    b.copy_(copy)
        return saved, (out.detach() if isinstance(out, torch.Tensor) else None)

    def _rng_state(self):
        torch = self.torch
        cuda = torch.cuda.get_rng_state(self.mover.device) if self.mover.device_type == "cuda" else None
        return torch.get_rng_state(), cuda

    def _set_rng_state(self, state):
        torch = self.torch
        torch.set_rng_state(state[0])
        if state[1] is not None:
            torch.cuda.set_rng_state(state[1], self.mover.device)

    def _check(self, call, output):
        """Recorded iteration: run the call again now and compare (Note [Module recompute])."""
        mover = self.mover
        transport = mover.transport
        if mover._events:  # the check's memory is not the iteration's: its peak is left out of the trace
            last = mover._events[-1]
            last["window_peak"] = max(last["window_peak"], mover._max_allocated(mover.device) + last["absent"])
        rng = self._rng_state()  # (a block's run sets its call's own state and puts this one back)
        dev = mover.device
        mover._reset_peak(dev)  # (what came before is in the last window now)
        before = mover._allocated(dev)
        start = transport.mark()
        host = _clock()
        try:
            saved, out = self._run(call)
        except Exception as e:  # noqa: BLE001 - a module that cannot run again is not made again
            call.ok, call.why = False, "running it again raised %s" % type(e).__name__
            return
        finally:
            self._set_rng_state(rng)
        call.marks = (start, transport.mark())
        call.host_ms = (_clock() - host) * 1e3
        # placer/saved_plan.cpp, Note [Block run memory]: what the run held beyond the members it makes again
        call.extra = max(0, int(mover._max_allocated(dev) - before) - sum(m.nbytes for _, m in call.members))
        try:
            if len(saved) != call.count:
                call.ok, call.why = False, "it saved %d tensors again, %d the first time" % (len(saved), call.count)
                return
            compared = 0
            for pos, rec in call.members:
                if rec.storage is None and rec.host is not None:
                    # a block's member copied out already (the recorded iteration's reactive moves): its copy
                    mover.transport.compute_wait(rec.d2h)
                    same = self._same_as_copy(rec, self._storage_of(saved[pos]))
                elif rec.storage is None:
                    continue  # let go with no copy: nothing to compare with
                else:
                    same = self._same(rec.storage, self._storage_of(saved[pos]))
                if not same:
                    call.ok, call.why = False, "a saved tensor came out different"
                    return
                compared += 1
            if call.out_ref is not None and output is not None:
                if out is None or not self._same(self._storage_of(output), self._storage_of(out)):
                    call.ok, call.why = False, "its output came out different"
                    return
                compared += 1
            if not compared:
                call.ok, call.why = False, "none of what it saved was left to compare"
        finally:
            del saved, out
            mover._reset_peak(mover.device)

    def _same_as_copy(self, rec, b):
        torch = self.torch
        if b.nbytes() != rec.nbytes:
            return False
        host = rec.host.reshape(-1)[:rec.nbytes]
        return bool(torch.equal(host, flat_bytes(torch, b, self.mover.device).to("cpu")))

    def _same(self, a, b):
        torch, dev = self.torch, self.mover.device
        if a.nbytes() != b.nbytes():
            return False
        return bool(torch.equal(flat_bytes(torch, a, dev), flat_bytes(torch, b, dev)))

    def arm(self, call):
        """A member was let go to be made again: the call holds its inputs' storages until it runs (not one the plan
        copies out or makes again: each is back by the run, and held it would never leave the device)."""
        if call.held is None:
            call.held = {}
            specs = list(call.inputs or ()) + list((call.kw_inputs or {}).values())
            while specs:
                a = specs.pop()
                if a[0] == "seq":
                    specs.extend(a[2])
                elif a[0] == "rec" and not a[1].moving and a[1].index not in self.mover._remade:
                    # (one the plan copies out comes back by the run, Note [Block inputs]; one it makes again is
                    # made by then, _arg: held, neither would leave the device when let go)
                    rec = a[1]
                    st = resident(rec)
                    if st is not None:
                        call.held[rec.index] = st

    def make(self, call, rec):
        """Runs the call again and hands every member let go to be made again its storage (the rest of the run is
        dropped at once); returns rec's. The inputs it held go once no member of it is left to make."""
        mover = self.mover
        if call.inputs is None:
            raise RuntimeError("tierpack: cannot make a saved tensor again: its module call %s did not return "
                               "(Note [Module recompute])" % type(call.module).__name__)
        hand, later = [], False  # the members this run hands a storage: rec and those let go to be made by it
        for pos, m in call.members:
            ours = m.recipe is not None and len(m.recipe) > 3 and m.recipe[3] is call  # (not an op recipe's)
            if m is rec or (ours and m.released and m.fetched is None and not m.moving):
                hand.append((pos, m))
            else:
                later = later or (ours and not m.released and bool(m.handles))  # may be let go later (backward)
        saved, out = self._run(call, {pos for pos, _ in hand})
        if len(saved) != call.count:
            raise RuntimeError("tierpack: cannot make a saved tensor again: %s saved %d tensors when run again, "
                               "%d the first time (Note [Module recompute])"
                               % (type(call.module).__name__, len(saved), call.count))
        mine = None
        for pos, m in hand:
            t = out if pos == OUTPUT else saved[pos] if pos != CAST else (
                out.to(call.casts[m.index]) if out is not None else None)
            if t is None or self._storage_of(t).nbytes() != m.nbytes:
                raise RuntimeError("tierpack: cannot make a saved tensor again: %s made a storage of another size "
                                   "(Note [Module recompute])" % type(call.module).__name__)
            if m is rec:
                mine = t
            else:
                m.fetched = t
                mover._absent -= m.nbytes
                mover.counters.recomputed += 1
                mover.counters.bytes_recomputed += m.nbytes
        del saved, out
        if not later:
            call.held = None
            call.inputs = [("gone",) if a[0] == "held" else a for a in call.inputs]  # its holds end here
            if call.kw_inputs:
                call.kw_inputs = {k: ("gone",) if a[0] == "held" else a for k, a in call.kw_inputs.items()}
        return mine

    # --------------------------------------------------------------------------------- the trace
    def summary(self):
        """One line: which module types are run again and why the others are not (the recorded iteration's)."""
        def names(verdicts):
            yes = sorted(n for n, why in verdicts.items() if not why)
            no = sorted("%s (%s)" % (n, why) for n, why in verdicts.items() if why)
            return ", ".join(yes) or "none", ", ".join(no) or "none"
        line = "modules run again to make what they saved: %s; not: %s" % names(self.verdicts)
        if self.block_verdicts:  # (a type some of whose calls qualified is on both sides, with counts)
            v = self.block_verdicts
            yes = sorted(n if ok == calls else "%s (%d of %d calls)" % (n, ok, calls) for n, (ok, calls, _) in v.items() if ok)
            no = sorted("%s (%s%s)" % (n, "" if not ok else "%d of %d calls: " % (calls - ok, calls), why)
                        for n, (ok, calls, why) in v.items() if ok < calls)
            line += "; blocks that can run again: %s; not: %s" % (", ".join(yes) or "none", ", ".join(no) or "none")
        return line

    def held_now(self):
        """Recorded iteration: the bytes the calls hold now of inputs nothing else holds (Note [Holds]); where this
        torch cannot count a storage's holders, every held input."""
        use_count = getattr(self.torch._C, "_storage_Use_Count", None)
        total, still = 0, []
        for call in self.holding:
            specs = list(call.inputs or ()) + list((call.kw_inputs or {}).values())
            held = [a[1] for a in _flatten_specs(specs) if a[0] == "held"]
            if not call.holds or not held:
                continue
            still.append(call)
            for t in held:
                st = self._storage_of(t)
                # the storage's holders: the held tensor and `st` itself; more, and the program holds it too
                if use_count is None or use_count(st._cdata) <= 2:
                    total += st.nbytes()
        self.holding[:] = still
        return total

    def holding_members(self):
        """Recorded iteration, at its end: the storages that the calls which held inputs make (Note [Holds])."""
        out = set()
        for call in self.calls + self.blocks:
            if call.hold_bytes:
                out.update(m.index for _, m in call.members)
        return out

    def fill_trace(self, seen, elapsed_ms):
        """Recorded iteration: recompute_ms and recompute_from of every member of a call that matched
        (a storage an op recipe makes already keeps that recipe)."""
        for group, call in enumerate(self.calls):
            if not call.ok or self.ok.get(call.module) is not True or call.marks is None:
                continue
            members = sorted(call.members, key=lambda pm: pm[0])
            ms = max(elapsed_ms(*call.marks), 0.0)
            before = []
            for _, m in members:
                entry = seen[m.index] if m.index < len(seen) else None
                if entry is not None and entry.get("movable") and "recompute_ms" not in entry:
                    entry["recompute_ms"] = ms
                    entry["recompute_group"] = group
                    entry["recompute_from"] = list(call.reads) + list(before)
                before.append(m.index)

    def fill_blocks(self, seen, elapsed_ms):
        """Recorded iteration: the trace's blocks (Note [Block recompute]) and each member's ``block``."""
        out = []
        for call in self.blocks:
            if not call.ok or self.block_ok.get(call.module) is not True or call.marks is None:
                continue
            movable = [m for _, m in call.members if m.index < len(seen) and seen[m.index].get("movable")]
            if not movable:
                continue
            for m in movable:
                seen[m.index]["block"] = len(out)
            out.append({"ms": max(elapsed_ms(*call.marks), 0.0), "from": sorted(call.reads), "host_ms": call.host_ms,
                        "extra_bytes": call.extra})
        return out
