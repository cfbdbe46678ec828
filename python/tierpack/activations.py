"""The GPU tier's storage mover: saved activations leave the device and come back through autograd's
saved-tensor hooks, as whole storages, in stream order, at the points the placer's plan names.

Installed by ``tierpack.cuda.install()`` (the default GPU mechanism, ``TIERPACK_GPU=mechanism:storage``).
PyTorch's own caching allocator stays the CUDA allocator: its statistics, ``torch.OutOfMemoryError`` and
CUDA graphs work as without tierpack; the budget is its memory limit (Note [Budget]).

Note [Storage moves]
~~~~~~~~~~~~~~~~~~~~
Remapping VMM page groups costs the driver ~12.7-27 ms per GiB and holds compute while it happens;
a pinned copy costs ~19.5 ms per GiB and overlaps compute (docs/architecture.md). Most bytes a budget
forces off the device are activations saved for backward, and autograd hands each of them to a pack hook
and asks for it back through an unpack hook, which may return it at another address. So they move as
storages, with no remap and no gate:

* pack: the saved tensor's storage (views share it: one copy per storage, counted once) gets a record;
  the hook returns a handle (record, dtype, size, stride, offset) and keeps the tensor until the storage
  is let go. A storage the plan moves is copied out at its first pack on the device-to-host stream,
  after the compute queued so far, into a pooled pinned buffer;
* release (a later pack or unpack, as planned): the compute stream waits for the copy out's event (on
  the GPU: the CPU never waits) and the hook drops its references, so PyTorch's allocator reuses the
  block in stream order on the compute stream, after the copy;
* fetch (a call of backward, as planned): a new storage is allocated on the compute stream and filled on
  the host-to-device stream; at its use (the unpack) the compute stream waits for that copy's event and
  the handle is rebuilt on the new storage. A storage asked for before its fetch is fetched then (late);
* the plan (placer/saved_plan.cpp, Note [Storage move plan], through the C ABI ``tierpack_plan_saved``)
  comes from one recorded iteration: at every pack and unpack, the GPU time (a timing event on the
  compute stream) and the allocator's live bytes, and the most live bytes until the next call;
* a later iteration whose calls stop matching the recorded ones (another storage, another size) moves
  nothing more in that iteration (what is away comes back at its use); after ``divergences`` such
  iterations in a row the next one is recorded again and a new plan is made.

The hooks run at every saved tensor, and the module hooks (Note [Module recompute]) at every module call, so
on models of many small modules their host time is the step's: a T5-style model made ~5500 calls an iteration
on the H200 at 60-85 us each (197-531 ms of host time against a ~220 ms step). So the hot path asks torch
nothing twice: a plain tensor's storage in one call (``storage_getter``: torch 1.13's ``storage()`` builds a
TypedStorage around it), the storage's size read once, the device compared whole once it is known (its
``type`` builds a string), the spellings of this torch (the graph task id, autocast's state) chosen once, no
timing wrapper of its own, no empty actions made for calls where the plan does nothing, and the part of
``watching()`` that holds for the whole iteration read at its start. bench/gpu/hook_cost.py measures it on the
CPU (``TIERPACK_CUDA_LIB=build/lib/libtierpack_cuda.so /usr/bin/python3 bench/gpu/hook_cost.py``; 2-core
Debian, torch 1.13; the best of 3 runs alternated with the code before): in planned iterations 17.1 -> 13.3 us
of hook time per traced call, 10.1 -> 7.8 us without the copies and recomputations the hooks start (what a
GPU's host only queues), and 4.3 -> 2.4 us per module hook; 5.6 -> 3.9 us per call in warm-up.

Before the plan (warm-up and the recorded iteration) the mover reacts instead (Note [Reactive moves]).

Note [Reactive moves]
~~~~~~~~~~~~~~~~~~~~~
Until a plan exists, the budget still counts: when the previous iteration's live peak (plus what was away)
was over the limit, every eligible storage is queued at its first pack, and at every call the oldest queued
are copied out and let go while live bytes exceed the limit (the compute stream waits for each copy). A
storage let go comes back at its use (late). Copied out at its pack instead, every saved storage took a
pinned buffer: GPT-2 large's warm-up at 75% of its peak grew the pinned pool by 35 GB, 26.6 s of the hooks'
host time in one iteration (the T5-style model: 31 GB, 35.0 s; bench/results/gpu-h200-2026-12-03-1, call 4),
where the budget needed about a third of those bytes away. The first iteration moves nothing: it learns the live
peak. The recorded iteration counts what is away: its live bytes are the allocator's plus the bytes away, its GPU
times less the time compute waited for copies (timing events around each wait), so the trace is the iteration
without moves.

Note [Recording]
~~~~~~~~~~~~~~~~
Three iterations make the trace. The recorded one samples the allocator at every call (its live bytes, and
its peak since the previous call); those reads cost host time, which on the H200 left the GPU waiting
and made GPT-2 large's recorded step ~8x its real length (bench/results/gpu-h200-2026-12-01, call 3). So
the next iterations (``timed_iterations``, 2 by default) only record a timing event and the host's clock at
every call, and move nothing when the recorded live peak fits the device; their GPU times replace the
recorded ones call by call when they made the same calls, each call's the least of them (and the step's). One
timed iteration, right after the recorded one, measured GPT-2 large's step at 305.5 ms where its planned steps,
making 20 GB again, took 258-284 ms, and the T5-style model's at 609 ms against a default step of 245 ms
(bench/results/gpu-h200-2026-12-03-1, call 4): the plans were predicted 25% slow. The plan is made at the last
one's end.

Note [Budget]
~~~~~~~~~~~~~
The budget is the device memory PyTorch's allocator may hold (reserved bytes); the CUDA context is outside
it. The plan keeps live bytes under ``fill`` of the budget (0.95 under the default soft limit, 0.88 under
``limit:hard``); the rest is for what the allocator holds beyond its live bytes (Note [Reserved memory]).
The budget is soft by default: where no plan can fit it (not enough movable saved bytes) the run goes on
over it and the plan, the statistics and ``tierpack run`` say so, and the warm-up iterations before the
plan may pass it. With ``limit:hard`` the first plan makes the budget PyTorch's memory limit
(``torch.cuda.set_per_process_memory_fraction``): the allocator gives its cached pages back when it would
pass it (faster than the soft limit's replans, Note [Reserved memory]), and an allocation past it raises
``torch.OutOfMemoryError``, as PyTorch does at the device's size; tierpack's out-of-memory observer says
which limit and plan were in force and what the allocator held (its free gaps: Note [Reserved memory]). A
plan that does not fit keeps the limit too and its plan line says to expect that error: limit:hard is the
promise that the run stays under the budget (a Hugging Face GPT-2 at 25% got the error in its first planned
iteration: bench/results/gpu-h200-2026-12-02, call 4). The warm-up iterations have no limit (a limit in
warm-up made GPT-2 large fail in its first optimizer step on the H200: bench/results/gpu-h200-2026-12-01, call
1), nor do reactive moves after a plan is dropped. A first planned iteration whose live peak passes the planned
one (and the limit by more than ``PEAK_SLACK``, 0.5% of it) lowers the limit by the difference and plans again (at
most ``replans`` times), unless it found storages the program held past their release (Note [Held storages]):
then the plan is made again at the same limit with where each was freed. That iteration reads the allocator's
peak at every call, so the log line says in which calls' windows the live bytes first passed the planned peak
(``... passed the planned <P> GiB (first in the window after call <N>, <pack|unpack> of storage <S>: <live>
GiB)``; the statistics' ``over_planned``): with the recorded iteration (``<stats>.gpu<N>.saved.json``) that names
what the plan did not foresee. Its peaks count from its first call (``empty_cache`` first): before it the device
holds what the iteration before left, under another plan or none (the gradients until ``zero_grad``, the state an
unstreamed step kept).

Note [Held storages]
~~~~~~~~~~~~~~~~~~~~
Letting a storage go drops the record's storage and its handles' tensors; the memory is freed only if nothing
else holds the storage. The program may: a residual connection keeps its block's input in a variable until the
add at the block's end (``identity = x`` in a ResNet bottleneck, ``residual = hidden_states`` in a transformer
layer), so the previous block's output, let go when that block's call ended, stayed on the device until then, and
the plan's live peak was passed by its size. The first planned iteration of each plan takes a weak reference to
each storage it lets go (``torch.multiprocessing.reductions.StorageWeakRef``; an optimizer state's is resized to
nothing, freed whoever holds it, and not watched); one still alive after its release is looked at again at every
call, and the first call that finds it freed is its ``held_until`` (one alive at the iteration's end: the number
of calls, never let go). At the iteration's end the trace's storages get ``held_until``, the log says
``storage mover: N storage(s) let go were still held by the program (...): planning again with where each is
freed``, the statistics' ``held`` maps each storage to that call, and the plan is made again at the same limit
(at most 4 times), letting each such storage go no earlier (placer/saved_plan.cpp, Note [Held storages]).

Note [Reserved memory]
~~~~~~~~~~~~~~~~~~~~~~
What the device holds is PyTorch's reserved memory, not its live bytes. Storages let go in the middle of
forward and new ones of other sizes allocated around them leave holes no later request fits, so the
allocator maps more: on GPT-2 large at 75% of its peak a planned iteration held 27.2 GiB with a live peak
of 20.7 GiB (the plain caching allocator held 27.8, sizes rounded to 4 classes per power of two 28.2:
bench/results/gpu-h200-2026-12-01-2, calls 1-2). Two ways keep what the allocator holds under the budget:

* ``limit:soft`` (the default): a planned iteration whose reserved peak passes the budget lowers the
  plan's limit on live bytes by the excess (by half of ``ROOM_FRACTION`` of the budget at least, so that a few
  small excesses do not each cost a plan's first iteration) and plans again (``empty_cache`` then returns the old layout),
  at most ``reserved_replans`` times; after that the run goes on over its budget, and the statistics
  (``peak_reserved`` per iteration) and the log say so. It moves more bytes: GPT-2 large at 75% moved
  10.3 GB each way and ran 468 ms a step, still holding 24.1 GiB of a 22.4 GiB budget (call 2 of
  bench/results/gpu-h200-2026-12-01-3). A lowered limit whose plan later holds less than the budget by more than
  ``ROOM_FRACTION`` of it rises by half that room and plans again (at most ``room_replans`` times): the replans of
  the first planned iterations see the layouts of the plans before them.
* ``limit:hard``: the budget is the allocator's memory limit once a plan fits. Under expandable segments
  the holes are whole pages the allocator can unmap, and the pages of a new request mapped elsewhere are
  as good: giving them back costs ~2.2 ms per GiB and mapping new ones ~2.1 ms per GiB on the H200
  (bench/gpu/expandable_cost.py, call 2), against ~40 ms per GiB to copy a storage out and back. Reaching
  the limit, the allocator unmaps its cached pages and maps what the request needs. GPT-2 large at 75%
  ran 239 ms (fill 0.92) or 274 ms (fill 0.88) a step, the Llama-style decoder 290 ms (fill 0.88; soft:
  490 ms), within the budget (calls 3-4). But some of what the allocator holds it cannot give back, and an
  allocation that finds no room raises out of memory: at the errors it was 1.89 GiB of a 22.25 GiB budget
  (8.5%: the Llama-style decoder with fill 0.92) and 98-128 MiB of 664-930 MiB (14-15%: the CUDA test's
  small model, with fill 0.92 and 0.88), where the soft limit ran the same tests bit-identical (calls 3-5).
  PyTorch's source (c10/cuda/CUDACachingAllocator.cpp, read, not measured) says why: expandable
  segments map the large pool in 20 MiB pages and give back only pages wholly free, so every free gap
  between live blocks keeps up to a page or two mapped, and the limit check charges a request's whole size
  against what stays mapped. The out-of-memory observer now reads the allocator's blocks at the error
  (bench/results/gpu-h200-2026-12-02, call 1): for the Llama-style decoder it held 21.38 GiB with 19.49 GiB
  live, 1.89 GiB free in 204 gaps between live blocks (9.5 MiB on average, the largest 32.5 MiB: most under
  one page), and the request was 0.98 GiB. So the gaps, not live bytes over the plan, used the room; how
  many there are depends on the order storages are let go and made, which the plan does not model yet. The
  soft limit stays the default and ``limit:hard`` is the faster choice for runs that leave it room.

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

Note [Measured recomputation]
~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
The plan's recompute_ms are estimates (bytes at an assumed bandwidth for op recipes, the check run's
time for module calls), and the plan chooses between recomputing and copying by them (placer/saved_plan.cpp,
Note [Recompute cost]). So the first planned iteration of each plan records a timing event on the compute
stream before and after each storage it makes again; one iteration later (the events are done by then, so
nothing waits) their GPU times go beside the predictions: the log says how many storages were made again
in how many ms against the plan's ms, the iteration's statistics get ``recompute_ms``, the plan summary
``recompute_ms_predicted`` / ``recompute_ms_measured``, and the statistics file ``recomputations``: per
storage made again, [index, predicted ms, measured ms]. Later iterations record no events (each costs the
host tens of microseconds). On the H200 the estimates were 1.5-8.5x too low (HF GPT-2 large 3.0 against
25.8 ms, the T5-style model 19.2 against 53-70 ms, ResNet-50 0.2 against 0.8 ms: bench/results/
gpu-h200-2026-12-02-3, calls 2-4), which biased the choice toward recomputation. Most of it was module calls'
time shared among their members by bytes where making one member runs the whole call (now a group's run
time, spent once: Note [Recompute cost] in placer/saved_plan.cpp; not measured on the H200 since). For what
is left, when the measured total is off by more than 25%, every recompute_ms of the trace is scaled by
measured / predicted and the plan is made again at the same limit, once per recorded trace; that plan's
first iteration is timed too. The time between the two events is what the recomputation cost the compute
stream, including any wait for the host that launched it. An iteration that took new pinned memory does not scale
them (the next iteration is timed instead): pinned allocations hold the GPU's queue, and the Llama-style decoder's
first such iteration at 60% of checkpointing's peak measured 226 storages at 173.2 ms where the next, with no new
pinned memory, measured 67.7 ms; scaled by the first (10.54x) the plan moved 8.59 instead of 3.23 GiB each way and
ran 440.6 ms a step (bench/results/gpu-h200-2026-12-07-1, call 3).

Note [Measured plans]
~~~~~~~~~~~~~~~~~~~~
Two replans change the plan for a cost the hooks measured, not for the budget: the hooks' host time (Note [Host
time] in placer/saved_plan.cpp) and the recipes' measured times (Note [Measured recomputation]). Each is a guess of
the cost model, and on the H200 one guessed wrong: the T5-style model at 75% of its peak, planned again with 53 us
of host time per copy, stopped copying and ran its 24 blocks again, predicted 491 ms a step and measured 745-1084
ms, where the plan it replaced was predicted 447 ms (bench/results/gpu-h200-2026-12-08-1, call 1; the blocks'
runs took 182 ms against 71 predicted). So such a plan is on trial. Every iteration's GPU span (a mark on the
compute stream at its start and at its end, the step as the GPU saw it, idle time included: on a host-bound model
the host's time too) is read one iteration later, so nothing waits for it, and goes into the statistics'
``step_ms``; a planned iteration after its plan's first, matching the recorded one and taking no new pinned memory,
also counts for its plan (the plan summary's ``step_ms_measured``). A measured cost waits until the plan in force
has ``TRIAL_STEPS`` (2) such steps and no other trial runs (with one measured step the Llama-style decoder's plan
came back on a lucky 329 ms and then ran 386-453: bench/results/gpu-h200-2026-12-09-1, call 2); then the costs that
waited go into one new plan. Once the plan on trial (or the one the budget's replans made of it: a passed peak, held
storages, the allocator's reserved bytes) has ``TRIAL_STEPS`` such steps, their median is compared with the replaced
plan's (while the two medians differ by less than either plan's spread of steps, up to ``TRIAL_MAX_STEPS``, 4, are
measured first: the T5-style model's steps varied 509-601 ms under one plan, bench/results/gpu-h200-2026-12-09-1,
call 3): longer by more than ``TRIAL_MARGIN`` (3%), or not fitting the budget where the replaced plan did, the
replaced plan comes back as it was (its moves, its summary, its .saved.json), and the costs that made the new one
leave the plans made later for the budget (the host's time is not counted nor measured again; the recipes' times are
scaled back): the first H200 run went back to the plan from iteration 12 and then, planning again for the
allocator's reserved bytes with the host's time still counted, chose the blocks' runs again (638-1169 ms a step;
bench/results/gpu-h200-2026-12-09-1, call 1). The log says which way it went (``the plan made for the hooks' host
time and the recipes' measured times runs 405.6 ms a step (measured, 2 steps) against 328.8 ms for the plan from
iteration 6: going back to that plan, ...``, call 2) and the statistics' ``trials`` list each decision. A trial
costs the new plan's first iteration and two to four more, and each cost is tried once per recorded trace, so a run
settles some 15-25 iterations in (the bench warms tierpack up for 18-24 steps).

Note [Python's collector]
~~~~~~~~~~~~~~~~~~~~~~~~
The hooks keep a handle per saved tensor and a record per storage for the length of an iteration, so
thousands of objects a step outlive Python's young generations and are promoted to the oldest, and every
few iterations a full collection runs, inside whichever hook allocates then. It scans every object the
program holds (the model, torch, transformers): on the H200, steps of GPT-2 large took 100-300 ms more in
iterations whose hooks' own host time jumped by as much, every 5-7 iterations (bench/results/
gpu-h200-2026-12-02-3, calls 2 and 4; whether the collector caused them is not known yet). On the CPU
a full collection landed in the hooks of bench/gpu/hook_cost.py's model (``--iterations 40 --gc on``):
its iteration's collections took 57-59 ms and the hooks 78-80 ms, against a median of 21 ms. So at its
end of the recorded iteration (before the timed one, whose GPU times the plan uses) the mover collects once and
freezes what is alive then (``gc.freeze()``): later collections
leave those objects out (``--gc freeze``: 13-14 ms and 36-45 ms; two runs each). What is frozen is still freed
when its reference count drops; only cycles among objects alive at that moment are never collected (the
model, the optimizer and torch's own live as long as the run). ``TIERPACK_GPU`` ``gc:as-is`` leaves the
collector as it was. Each iteration's statistics say what the collector cost (``gc_ms``, ``gc_full``:
full collections). On the H200 (bench/results/gpu-h200-2026-12-02-4, call 1) frozen at the first plan, GPT-2
large's four timed steps at 75% were 254 ms each (collector 2-3 ms an iteration; session 27's varied 255-462 ms);
but the timed iteration before the plan still held a full collection (218-271 ms, call 2), which made its GPU
times 40 ms long and every prediction with them: hence the freeze one iteration earlier.

Note [Optimizer state]
~~~~~~~~~~~~~~~~~~~~~~
The optimizer's state tensors (AdamW's exp_avg and exp_avg_sq: twice the parameters, in fp32) are read
only by the optimizer step, so they can be away for the whole forward and backward: the longest absence
any storage can have, at the cost of one copy each way. They are storages of the plan like the saved
ones: each has a pack at the iteration's first call (where its copy out may start: the step wrote it
last) and an unpack at the optimizer's pre-step hook (its use). Let go, the storage is resized to nothing
(``untyped_storage().resize_(0)``, as FSDP frees parameters); fetched, it is resized back and filled on
the host-to-device stream, so the optimizer keeps the same tensor objects. The pre-step hook brings back
every state still away (late) and makes the compute stream wait for their copies, so the step never reads
a state that is not there. The parameters themselves stay (they are read in forward and backward).

What never moves: storages under ``min_bytes`` (1 MiB; the hooks hand them back at once, untraced), the optimizer's parameters (known by their
storage from the optimizer-step hook: letting go of them frees nothing), tensors that are not plain
strided tensors of the device (subclasses, conjugate or negative views, sparse), and storages first saved
during backward (a reentrant checkpoint's recomputation). Only tensors saved on the thread that installed
the hooks are seen (autograd's default hooks are per thread); under ``torch.utils.checkpoint`` the
checkpoint's own hooks hold what is saved inside a checkpointed region.
"""

from __future__ import annotations

import gc
import json
import statistics
import sys
import threading
import weakref
from time import perf_counter as _clock

from tierpack._storage import autocast_cache_on as _autocast_cache_on
from tierpack._storage import autocast_on as _autocast_on
from tierpack._storage import flat_bytes as _flat_bytes
from tierpack._storage import on_storage as _on_storage
from tierpack._storage import resident
from tierpack._storage import storage_getter
from tierpack._storage import weak_ref as _storage_weak_ref
from tierpack._storage import through_views as _through_views
from tierpack._storage import untyped as _untyped
from tierpack.module_recompute import ModuleRecompute

MiB = 1 << 20


# --------------------------------------------------------------------------------- storage helpers
class _Record:
    """One storage in this iteration: saved for backward (views share it), or an optimizer state tensor's."""

    __slots__ = ("index", "nbytes", "key", "storage", "tensor", "host", "d2h", "fetched", "h2d", "handles",
                 "released", "moving", "recipe", "held", "out_seq")

    def __init__(self, index, nbytes, key, storage, tensor=None):
        self.index, self.nbytes, self.key, self.storage = index, nbytes, key, storage
        self.tensor = tensor    # an optimizer state tensor (its storage is resized in place), else None
        self.host = self.d2h = self.fetched = self.h2d = None
        self.handles = []       # _Handle objects autograd holds, not yet unpacked
        self.released = False   # the device storage was let go
        self.moving = False     # copied out (a plan's move, or reactive)
        self.out_seq = 0        # the order of its copy out on the one device-to-host stream (Note [Batched moves])
        self.recipe = None      # (make() -> tensor over a new storage, storages read, bytes read): Note [Recipes]
        self.held = False       # autocast's cache holds it until forward ends (Note [Recipes])


class _Handle:
    """What the pack hook hands autograd for a tensor whose storage has a record."""

    __slots__ = ("rec", "t", "dtype", "size", "stride", "offset", "version")

    def __init__(self, rec, t):
        self.rec, self.t = rec, t
        self.dtype, self.size, self.stride, self.offset = t.dtype, tuple(t.shape), tuple(t.stride()), t.storage_offset()
        self.version = t._version


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


def _cast_parameter(node):
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


def _find_recipe(torch, node, t, storage, made_by, remake=None):
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
    param = _cast_parameter(node)
    if (param is None or param.device != t.device or not param.is_contiguous() or
            param.numel() * t.element_size() != storage.nbytes()):
        return None
    dtype, version = t.dtype, param._version
    return (lambda: _checked(param, version, "a parameter").detach().to(dtype)), [], param.numel() * param.element_size()


class _Counters:
    FIELDS = ("saved_storages", "saved_bytes", "bytes_out", "bytes_in", "released", "fetched_late", "divergences",
              "peak_live", "peak_reserved", "calls", "host_ms", "recomputed", "bytes_recomputed", "gc_ms", "gc_full",
              "pinned_new",
              # Note [Host time]: the planned actions' host time, per copy issued and per recomputation or block run
              "move_host_ms", "copies_issued", "remake_host_ms", "remakes", "block_host_ms", "block_runs",
              "step_chunks")  # Note [Streamed step]: chunks a streamed step updated before the optimizer's own step

    def __init__(self):
        for f in self.FIELDS:
            setattr(self, f, 0)

    def as_dict(self):
        return {f: getattr(self, f) for f in self.FIELDS}


_gc_movers = weakref.WeakSet()  # the movers whose iterations count Python's collections
_gc_start = [0.0]


def _gc_timer(phase, info):
    """The one gc.callbacks entry: adds each collection to every live mover's iteration: gc_ms (its time, in
    the hooks or not) and gc_full (collections of the oldest generation). One entry for all movers: an entry
    that removed itself while the collector walked the list made it skip the next one's start. Steps of GPT-2
    large on the H200 took 100-300 ms more where the hooks' own host time jumped by as much (bench/results/
    gpu-h200-2026-12-02-3, calls 2 and 4); a full collection landing in a hook is one candidate, and these
    counters say (Note [Python's collector])."""
    if phase == "start":
        _gc_start[0] = _clock()
        return
    if not _gc_start[0]:
        return
    ms = (_clock() - _gc_start[0]) * 1e3
    _gc_start[0] = 0.0
    for m in list(_gc_movers):
        c = m.counters
        c.gc_ms += ms
        if info.get("generation") == 2:
            c.gc_full += 1


class StorageMover:
    """The pack/unpack hooks, their recorded iteration and the plan they follow (Note [Storage moves]).

    torch: the torch module; transport(device): the copier (copy_streams.CudaTransport, or a test double
    with its methods); planner(trace_dict, options_dict) -> plan dict (the placer through the C ABI);
    budget_bytes: the allocator's budget, or budget_fraction: of the recorded iteration's live peak (None
    for both: nothing moves); allocated(dev), max_allocated(dev), reset_peak(dev): the allocator's live
    bytes, its peak since the last reset, reset; set_limit(dev, bytes or None): make the budget a hard
    limit (or lift it; limit:hard only); empty_cache(): give the allocator's unused memory back;
    memory_state(dev): the allocator's reserved and live bytes and its free gaps, read at an out-of-memory
    error; record_iteration: the iteration (1-based) that is recorded (>= 3 by default: the first learns the
    live peak, the second moves reactively and so fills the pinned pool with what the budget needs away, Note
    [Reactive moves]; the next timed_iterations are timed, Note [Recording]); capacity(dev): the device's
    memory (the timed iterations move nothing under it);
    optimizer_state: move the
    optimizer's state tensors too (Note [Optimizer state]): only where optimizer_begins(opt) runs before
    every step (tierpack.cuda registers it as a global optimizer pre-step hook).
    """

    HELD_REPLANS = 4  # plans made again for storages the program held, at most (Note [Held storages])
    # A first planned iteration's live peak this far over the limit (a fraction of it) plans nothing again (Note
    # [Budget]): the H200 runs of session 31 planned again for passes of 0.01-0.02 GiB of 9.5-17.8 GiB, each replan
    # an iteration of new allocations after empty_cache, for a limit lower by as little
    PEAK_SLACK = 0.005
    # Room under the budget (a fraction of it) in what the allocator holds that raises a lowered limit (Note [Reserved
    # memory]): less is the allocator's rounding from one iteration to the next
    ROOM_FRACTION = 0.05
    # Note [Measured plans]: a plan made for a cost the hooks measured runs this many measured iterations before it is
    # compared with the plan it replaced, and is given up when its median step is longer than that plan's by more than
    # TRIAL_MARGIN of it
    TRIAL_STEPS = 2
    TRIAL_MARGIN = 0.03
    # ... and up to this many while the two medians differ by less than either plan's steps spread (max - min)
    TRIAL_MAX_STEPS = 4

    def __init__(self, torch, transport, planner, budget_bytes, allocated, max_allocated, reset_peak,
                 set_limit=None, record_iteration=3, device_type="cuda", min_bytes=MiB, fill=0.95,
                 divergences=2, replans=2, hard_limit=False, budget_fraction=None, stats_out="",
                 empty_cache=None, optimizer_state=False, capacity=None, log=None, max_reserved=None,
                 reserved_replans=4, room_replans=2, recompute=True, recompute_bytes_per_s=2e12, memory_state=None,
                 fits_fraction=0.98, gc_freeze=False, recompute_blocks=True, host_time=True, timed_iterations=2,
                 stream_step=False, step_chunk_bytes=128 << 20):
        self.torch = torch
        self.timed_iterations = max(1, int(timed_iterations))  # Note [Recording]
        self.host_time = bool(host_time)  # plan with the hooks' host time (Note [Host time] in placer/saved_plan.cpp)
        self.recompute_blocks = bool(recompute_blocks)  # Note [Block recompute] in module_recompute.py
        self.gc_freeze = gc_freeze  # Note [Python's collector]
        self._frozen = False
        self._pinned_before = 0   # the transport's pinned bytes at the iteration's start
        self._storage_of = storage_getter(torch)  # untyped() in one call (the hooks' host time: Note [Storage moves])
        self._graph_task_id = getattr(torch._C, "_current_graph_task_id", None)
        self.fits_fraction = fits_fraction  # a recorded live peak under this much of the budget moves nothing
        self._memory_state = memory_state
        self.out_of_memory_state = None  # the allocator's state at an out-of-memory error (memory_state(dev))
        self.over_planned = []  # Note [Budget]: (call, kind, storage, bytes) of the first windows over the planned peak
        self.held = {}  # Note [Held storages]: storage index -> the call until which the program held it
        # Note [Streamed step]: the optimizer step a chunk of state at a time (only with optimizer_state)
        self.stream_step = bool(stream_step) and bool(optimizer_state)
        self.step_chunk_bytes = max(1, int(step_chunk_bytes))
        self._stepping = None  # a streamed step between its pre- and post-hook: what to finish and restore
        self._away = {}        # id(state tensor) -> (host copy, its event, bytes): sent out by the last streamed step
        self._state_hooked = weakref.WeakSet()  # optimizers whose state_dict brings the state home first
        self.held_replans_left = self.HELD_REPLANS
        self._weak_ref = _storage_weak_ref(torch)
        self._make_transport = transport
        self._planner = planner
        self.budget = int(budget_bytes) if budget_bytes else None
        self.fraction = float(budget_fraction) if budget_fraction and not self.budget else None
        self.fill = fill
        self.limit = int(self.budget * fill) if self.budget else None
        self.stats_out = stats_out or ""
        self._allocated, self._max_allocated, self._reset_peak = allocated, max_allocated, reset_peak
        self._set_limit = set_limit
        self._limit_in_force = None  # what _set_limit last made the allocator's limit
        self._max_reserved = max_reserved
        self._empty_cache = empty_cache
        # Note [Recording]: the timing iteration moves nothing when the recorded live peak fits the device.
        self._pressure_in_timing = None if capacity is None else (
            lambda trace: max(e["window_peak"] for e in trace["events"]) > 0.9 * capacity(self.device))
        self.record_iteration = max(1, int(record_iteration))
        self.device_type = device_type
        self.min_bytes = min_bytes
        self.max_divergences = max(1, int(divergences))
        self.replans_left = int(replans)
        self.reserved_replans_left = int(reserved_replans)
        self.room_replans_left = int(room_replans)
        self.recompute = bool(recompute)
        self.recompute_bytes_per_s = float(recompute_bytes_per_s)
        self._remade = frozenset()     # storages the plan in force makes again (Note [Recipes])
        self._remaking = False         # a timed recomputation runs now (Note [Measured recomputation])
        self._out_seq = 0              # copies out issued so far (Note [Batched moves])
        self._by_block = frozenset()   # ... of them, by running their block again (Note [Block recompute])
        self.hard_limit = hard_limit
        self.move_optimizer_state = optimizer_state
        self.log = log or (lambda msg: sys.stderr.write("tierpack: " + msg + "\n"))
        self.transport = None
        self.device = None
        self._lock = threading.RLock()
        self._parameters = set()
        self._state_tensors = []      # the optimizer's state tensors on the device, in a stable order
        self.iteration = 1
        self.plan = None              # the placer's plan (dict) in force
        self.plan_summary = None
        self._measure_remakes = False  # Note [Measured recomputation]
        self._pending_remakes = None
        self._saved_options = None     # the options of the plan in force (its .saved.json)
        self.recomputations = None     # the last measured: {"iteration", "predicted_ms", "measured_ms", "storages"}
        self._trace = None            # the recorded iteration (dict), kept for inspection and replans
        self._calibrated = False
        self._bandwidth = None
        self._pressure = False        # reactive moves in this iteration (Note [Reactive moves])
        self._diverged_in_a_row = 0
        self._check_plan = False      # the first planned iteration: compare its peak with the plan's
        self._idle = False            # a plan with no moves: the hooks step aside
        self.history = []             # per-iteration {"iteration", "mode", counters...}
        self.phase = "warm-up"
        self._iteration_start = None
        self._host_start = None        # the host's clock at the iteration's start (Note [Host time])
        self._host_costs = None        # (ms per copy issued, ms per recomputation), planned with
        self._host_measured = None     # ... as measured, once per trace (Note [Host time])
        self._trials_due = []          # Note [Measured plans]: (why, apply(), undo()) of costs waiting for a trial
        self._optimizer_start = None
        # Note [Measured plans]: the GPU span of the last iteration (its summary when it counts for its plan, its
        # history entry, the marks at its start and end), read at the next iteration's end; the plan a cost replan
        # replaced, while its successor is on trial; the trials decided so far
        self._span = None
        self._incumbent = None
        self.trials = []
        self._modules = ModuleRecompute(self)  # Note [Module recompute]
        self._module_hooks = []
        self._begin_iteration()
        _gc_movers.add(self)
        if _gc_timer not in gc.callbacks:
            gc.callbacks.append(_gc_timer)

    # -------------------------------------------------------------------------------- iterations
    def _begin_iteration(self):
        self._records = {}        # storage key -> _Record (alive on the device, or away)
        self._by_index = []       # _Record by storage index
        self._states = []         # the optimizer state records of this iteration
        self._started = False     # the iteration's first call was made (state records exist)
        self._fifo = []           # reactive: records copied out, not yet let go, oldest first
        self._call = 0            # pack/unpack calls so far
        self._absent = 0          # bytes let go and not back
        self._diverged = False
        self._backward = False
        self._autocast_in_backward = False
        self.counters = _Counters()
        self._recording = self.plan is None and self.iteration == self.record_iteration and self.device is not None
        self._timing = self.plan is None and self._trace is not None and \
            self.record_iteration < self.iteration <= self.record_iteration + self.timed_iterations
        self._events = [] if (self._recording or self._timing) else None
        self._stalls = []         # (call index, start event, end event) of compute waits, recorded iteration
        self._seen = []           # recorded iteration: {"bytes", "movable"} per storage index
        self._made_by = {}        # forward: autograd node -> (record, handle) of what it made (Note [Recipes])
        self._needed = set()      # storages a let-go storage will be made from: never let go (Note [Recipes])
        self._max_absent = 0
        # Note [Budget]: the first planned iteration of each plan reads the allocator's peak at every call, to say
        # where its live bytes first passed the planned peak (the call whose window it was)
        self._peak_watch = [] if (self.plan is not None and self._check_plan and self.device is not None) else None
        self._watched_peak = 0
        self._watch_call = None
        # Note [Held storages]: and which storages it let go stayed, held by the program (index -> the call by
        # which each was freed)
        self._held_watch = [] if self._peak_watch is not None and self._weak_ref is not None else None
        self._held_seen = {}
        # Note [Measured recomputation]: the first planned iteration of each plan times what it makes again.
        self._remake_marks = [] if self._measure_remakes and self.plan is not None else None
        self._measure_remakes = False
        self._modules.begin_iteration()
        if self.plan is not None:
            self.phase = "planned"
        if self._reset_peak is not None and self.device is not None:
            self._reset_peak(self.device)

    def iteration_end(self, optimizer=None):
        """Called at the end of every iteration (the optimizer's post-step hook)."""
        with self._lock:
            if self._stepping is not None:
                self._finish_step()
            if optimizer is not None:
                self.note_optimizer(optimizer)
            end = self.transport.mark() if self.transport is not None else None
            mode = "idle" if self._idle else self.phase
            # Note [Recording]: after the recorded iteration, the timed ones move nothing under the device's size.
            timing_next = self._pressure_in_timing is not None and (
                (self._recording and bool(self._events)) or
                (self._timing and self.iteration < self.record_iteration + self.timed_iterations))
            # new pinned host memory this iteration (a pool that grows asks the driver: milliseconds per 100 MB)
            pinned = getattr(self.transport, "pinned_bytes", 0)
            self.counters.pinned_new = pinned - self._pinned_before
            self._pinned_before = pinned
            if self._peak_watch is not None:
                self._watch_window()  # (the last call's window runs to the iteration's end)
            if self.device is not None:
                self.counters.peak_live = int(self._max_allocated(self.device))
                if self._max_reserved is not None:
                    self.counters.peak_reserved = int(self._max_reserved(self.device))
            # Note [Host time]: a planned iteration's hooks measure the host time of a copy and of a recomputation
            # (once per trace); the plan is made again with them unless a replan below does so anyway
            plan_before = self.plan
            measured = self._read_span(end)
            if self.plan is not None and not self._diverged:
                self._measure_host_costs()
            if self._recording and self._events:
                self._finish_trace(end)
                # Note [Python's collector]: before the timed iteration, whose GPU times the plan uses (a full
                # collection there starved the GPU: 218-271 ms of it in GPT-2 large's and Llama's timed
                # iterations, whose steps came out 40 ms long: bench/results/gpu-h200-2026-12-02-4, call 2)
                self._freeze_objects()
                if self._pressure_in_timing is not None:
                    self._pressure = self._pressure_in_timing(self._trace)
            elif self._timing and self._events is not None:
                matched = self._finish_timing(end)
                if not matched or self.iteration >= self.record_iteration + self.timed_iterations:
                    self._make_plan()
            elif self._recording or (self.plan is None and self.iteration > self.record_iteration):
                self.record_iteration = self.iteration + 1  # nothing was saved: record the next one
            elif self.plan is not None and not self._diverged and self._check_plan:
                self._check_plan = False
                if not self._plan_with_held() and not self._check_planned_peak():
                    self._check_reserved()  # (a plan's first iteration that went as planned holds what it will)
            elif self.plan is not None and not self._diverged:
                self._check_reserved()
            if self.plan is not None and self._diverged:
                self._diverged_in_a_row += 1
                if self._diverged_in_a_row >= self.max_divergences:
                    self.log("storage mover: %d iterations in a row did not match the recorded one: recording "
                             "iteration %d again" % (self._diverged_in_a_row, self.iteration + 1))
                    self._drop_plan()
                    self.record_iteration = self.iteration + 1
            elif self.plan is not None:
                self._diverged_in_a_row = 0
            # Note [Reactive moves]: the natural peak is at most the allocator's plus what was away at most.
            if not timing_next:
                self._pressure = bool(self.limit) and self.counters.peak_live + self._max_absent > self.limit
            d = self.counters.as_dict()
            d.update(iteration=self.iteration, mode=mode, diverged=self._diverged)
            self.history.append(d)
            self._span = (measured, d, self._iteration_start, end)
            self._read_remake_times()
            if self.plan is plan_before and not self._diverged:
                self._judge_trial()
                self._start_trial(measured)
            if self._remake_marks:
                # A module call's members carry the whole run's time, spent once (Note [Recompute cost]):
                # the first of them made in this iteration is predicted at it, the others at nothing.
                predicted, groups = {}, set()
                for s, _, _ in self._remake_marks:
                    st = self._trace["storages"][s]
                    if s in self._by_block:  # Note [Block recompute]: one run of the block
                        g, ms = ("block", st["block"]), self._trace["blocks"][st["block"]]["ms"]
                    else:
                        g, ms = st.get("recompute_group", -1), st.get("recompute_ms", 0.0)
                    predicted[s] = 0.0 if g != -1 and g in groups else ms
                    groups.add(g)
                self._pending_remakes = (d, self._remake_marks, predicted, self.plan_summary)
            del self.history[:-200]
            self._release_all()
            if self.stats_out and self.device is not None:
                self._write_stats()
            self.iteration += 1
            # The next iteration starts now, after this bookkeeping (a recorded iteration's ends with a
            # synchronisation per call): marked at the top, the timed iteration's GPU times counted the GPU
            # idling through it (the likely cause of its 240 ms against the default's 144 ms on GPT-2 large,
            # bench/results/gpu-h200-2026-12-01, call 4; not measured again since).
            self._iteration_start = self.transport.mark() if self.transport is not None else None
            self._host_start = _clock()
            self._begin_iteration()

    def _read_span(self, end):
        """Note [Measured plans]: the GPU span of the iteration before this one (start mark to end mark: its step as
        the compute stream saw it, idle time included) goes into its history entry (``step_ms``) and, when it
        counts for the plan it ran (a planned iteration after the plan's first, matching the recorded one, that
        took no new pinned memory), into that plan's ``step_ms_measured``. Read one iteration late, so nothing
        waits for it. Returns whether this iteration counts for the plan in force (read at the next one's end)."""
        if self._span is not None:
            summary, entry, a, b = self._span
            self._span = None
            if a is not None and b is not None:
                ms = self.transport.elapsed_ms(a, b)
                entry["step_ms"] = ms
                if summary is not None:
                    steps = summary.setdefault("step_ms_measured", [])
                    steps.append(ms)
                    del steps[:-16]
        if self.plan is None or self._diverged or self.plan_summary is None or end is None or \
                self.iteration <= self.plan_summary["iteration"] + 1 or \
                self.counters.pinned_new > 0:
            return None
        return self.plan_summary

    def _start_trial(self, counted):
        """Note [Measured plans]: the costs measured since the last trial go into the plan at once, on trial against
        the plan in force, once that plan has TRIAL_STEPS measured steps (`counted`: this iteration's, read later)."""
        if not self._trials_due or self._incumbent is not None or self.plan is None:
            return
        steps = len(self.plan_summary.get("step_ms_measured", ())) + (1 if counted is self.plan_summary else 0)
        if steps < self.TRIAL_STEPS:
            return
        due, self._trials_due = self._trials_due, []
        for _, apply, _ in due:
            apply()
        self.log("storage mover: planning again with %s, on trial against the plan from iteration %d (Note [Measured "
                 "plans])" % (" and ".join(w for w, _, _ in due), self.plan_summary["iteration"]))
        self._make_plan(self.plan["limit_bytes"], trial=(" and ".join(w for w, _, _ in due), [u for _, _, u in due]))

    def _judge_trial(self):
        """Note [Measured plans]: once the plan in force has TRIAL_STEPS measured steps, it is compared with the plan
        that the cost replan replaced; longer than that one's by more than TRIAL_MARGIN, that plan comes back."""
        inc = self._incumbent
        if inc is None or self.plan is None:
            return
        mine = self.plan_summary.get("step_ms_measured", [])
        if len(mine) < self.TRIAL_STEPS:
            return
        kept, why = inc["kept"], inc["why"]
        theirs = kept[3].get("step_ms_measured", [])
        unfit = bool(kept[0]["fits"]) and not self.plan["fits"]  # a plan that fits never gives way to one that does not
        if not theirs and not unfit:
            self._incumbent = None
            return  # (nothing measured to compare with: the new plan stays)
        ms, before = statistics.median(mine), statistics.median(theirs) if theirs else 0.0
        spread = max(max(mine) - min(mine), max(theirs) - min(theirs)) if theirs else 0.0
        if not unfit and len(mine) < self.TRIAL_MAX_STEPS and abs(ms - before) <= spread:
            return  # within the steps' own spread: measure more
        self._incumbent = None
        back = unfit or ms > before * (1 + self.TRIAL_MARGIN)
        self.trials.append({"iteration": self.iteration, "why": why, "plan_from": self.plan_summary["iteration"],
                            "step_ms": ms, "before_from": kept[3]["iteration"], "before_ms": before,
                            "kept": not back, "fits": bool(self.plan["fits"]), "steps": len(mine)})
        if not back:
            self.log("storage mover: the plan made for %s runs %.1f ms a step (measured, %d steps) against %.1f ms "
                     "before it: it stays (Note [Measured plans])" % (why, ms, len(mine), before))
            return
        self.plan, self._actions, self._idle, self.plan_summary, options = kept
        self._set_remade(self.plan)
        self._check_plan = False
        self._measure_remakes = False
        for undo in inc["undo"]:
            undo()
        self._write_saved(options)
        self.log("storage mover: the plan made for %s runs %.1f ms a step (measured, %d steps) against %.1f ms for the "
                 "plan from iteration %d%s: going back to that plan, and later plans leave that out (Note [Measured "
                 "plans])" % (why, ms, len(mine), before, kept[3]["iteration"],
                              ", and does not fit the budget where that plan did" if unfit else ""))

    def _measure_host_costs(self):
        """Note [Host time] (placer/saved_plan.cpp): the host time this planned iteration's hooks spent per copy
        issued (out or back, with its release and bookkeeping) and per recomputation run by a recipe or module,
        once per trace with host times. True when they were measured now.

        Not in a plan's first iteration, nor in one whose copies took new pinned memory: the first planned
        iteration of the T5-style model spent 4.5 s in its hooks (2.9 ms a copy) growing the pinned pool by
        ~12 GiB and reallocating what the plan's empty_cache gave back, its later ones 0.1-0.3 s
        (bench/results/gpu-h200-2026-12-03-1, call 3)."""
        c = self.counters
        if not self.host_time or self._host_measured is not None or self._trace is None or self.plan_summary is None or \
                (c.copies_issued < 8 and c.remakes < 4) or c.pinned_new > 0 or \
                self.iteration <= self.plan_summary["iteration"] + 1 or \
                not all("host_ms" in e for e in self._trace["events"]):
            return False
        costs = self._host_measured = (c.move_host_ms / c.copies_issued if c.copies_issued else 0.0,
                                       c.remake_host_ms / c.remakes if c.remakes else 0.0)
        self._trials_due.append(("the hooks' host time", lambda: setattr(self, "_host_costs", costs),
                                 self._forget_host_costs))
        self.log("storage mover: iteration %d: the hooks spent %.0f us of host time per copy issued (%d) and %.0f us per "
                 "recomputation (%d), %.0f us per block run (%d): planning with the host's time (Note [Host time])"
                 % (self.iteration, costs[0] * 1e3, c.copies_issued, costs[1] * 1e3, c.remakes,
                    c.block_host_ms / max(c.block_runs, 1) * 1e3, c.block_runs))
        return True

    def _read_remake_times(self):
        """Note [Measured recomputation]: the GPU time of each storage made again in the iteration that timed
        them, read one iteration later (its events are done by then: no wait), beside the plan's prediction."""
        if self._pending_remakes is None:
            return
        entry, marks, predicted, summary = self._pending_remakes
        self._pending_remakes = None
        measured = {}
        for s, a, b in marks:
            measured[s] = measured.get(s, 0.0) + self.transport.elapsed_ms(a, b)
        reuse = getattr(self.transport, "reuse_marks", None)
        if reuse is not None:
            reuse([m for _, a, b in marks for m in (a, b)])
        total, want = sum(measured.values()), sum(predicted.values())
        entry["recompute_ms"] = total
        self.recomputations = {"iteration": entry["iteration"], "predicted_ms": want, "measured_ms": total,
                               "storages": [[s, predicted[s], measured[s]] for s in sorted(measured)]}
        if summary is not None:
            summary["recompute_ms_predicted"], summary["recompute_ms_measured"] = want, total
        if summary is not None and summary is self.plan_summary:  # what gpu-replay shows beside the plan
            self._write_saved(self._saved_options, self.recomputations)
        self.log("storage mover: iteration %d made %d storages again in %.1f ms of GPU time (the plan predicted "
                 "%.1f ms)" % (entry["iteration"], len(measured), total, want))
        # Blocks are left out of the calibration: a block run again in backward waits for the host to launch its
        # Python forward, which its marks count (Llama-style decoder: 165-172 ms measured against 44 predicted, in
        # a step 18 ms longer than the plan without them; scaled by that the plan predicted 370 ms for a 222 ms step:
        # bench/results/gpu-h200-2026-12-02-4, call 2). Their time is the check's, in forward.
        mine = [s for s in measured if s not in self._by_block]
        got, est = sum(measured[s] for s in mine), sum(predicted.get(s, 0.0) for s in mine)
        ratio = got / est if est > 0 else 1.0
        if self._calibrated or not (ratio > 1.25 or ratio < 0.8) or self.plan is None or summary is not self.plan_summary:
            return
        if entry.get("pinned_new", 0) > 0:
            # Not from an iteration that took new pinned memory (its allocations hold the GPU's queue): time the next
            self._measure_remakes = bool(self._remade)
            return
        self._calibrated = True
        self._trials_due.append(("the recipes' measured times", lambda: self._scale_recipes(ratio),
                                 lambda: self._scale_recipes(1.0 / ratio)))
        self.log("storage mover: making storages again by their recipes took %.2fx the plan's estimate: planning again "
                 "with every recipe's time scaled by that" % ratio)

    def _scale_recipes(self, ratio):
        for st in self._trace["storages"]:
            if st.get("recompute_ms", -1) >= 0:
                st["recompute_ms"] *= ratio

    def _forget_host_costs(self):
        """Note [Measured plans]: later plans leave the hooks' host time out, and it is not measured again."""
        self._host_costs = None
        self.host_time = False

    def _release_all(self):
        for rec in self._by_index:
            self._retire(rec)
        self._records.clear()
        self._states = []

    def _retire(self, rec):
        if rec.host is not None:
            self.transport.give_back(rec.host, rec.h2d if rec.h2d is not None else rec.d2h)
            rec.host = None
        rec.storage = rec.fetched = rec.tensor = None
        for h in rec.handles:
            h.t = None
        rec.handles = []

    def out_of_memory(self, size, limit):
        """PyTorch's allocator is about to raise out of memory: say what tierpack had set and planned, and what
        the allocator held (Note [Reserved memory]: what it could not give back)."""
        gib = float(1 << 30)
        state = self._memory_state(self.device) if self._memory_state is not None else None
        if state is not None:
            self.out_of_memory_state = dict(state, iteration=self.iteration, size=size, limit=limit)
            if self.stats_out and self.device is not None:
                self._write_stats()  # the process may end with the error: the file says what happened
            held = ("; the allocator held %.2f GiB with %.2f GiB live: %.2f GiB free in %d gap(s) between live "
                    "blocks (largest %.1f MiB) that it could not give back"
                    % (state["reserved"] / gib, state["allocated"] / gib, state["free_mapped"] / gib,
                       state["gaps"], state["largest_gap"] / float(1 << 20)))
        else:
            held = ""
        if self.plan is not None and self.hard_limit and self.plan.get("fits"):
            self.log("storage mover: out of memory asking for %.2f GiB under the budget's limit %.2f GiB (limit:hard, "
                     "Note [Budget]); the plan keeps live bytes under %.2f GiB (fill %.2f)%s; a lower fill, or "
                     "TIERPACK_GPU limit:soft (no limit: the run may go over the budget), avoids this"
                     % (size / gib, limit / gib, self.plan["limit_bytes"] / gib, self.fill, held))
        else:
            self.log("storage mover: out of memory asking for %.2f GiB (limit %.2f GiB); %s%s" % (
                size / gib, limit / gib, "no plan yet (warm-up)" if self.plan is None else
                "no plan fits the budget (limit:hard keeps it: a larger budget, or limit:soft, lets the run go on)"
                if not self.plan.get("fits") else "the budget is soft", held))

    def _allocator_limit(self, limit):
        """Under limit:hard, `limit` (None: none) becomes PyTorch's memory limit, if it is not already."""
        if self._set_limit is not None and self.hard_limit and limit != self._limit_in_force:
            self._set_limit(self.device, limit)
            self._limit_in_force = limit

    def _drop_plan(self):
        self.plan = None
        self._incumbent = None
        self._set_remade(None)
        self._idle = False
        self.phase = "reactive"
        self._allocator_limit(None)  # reactive moves cannot promise the budget

    # --------------------------------------------------------------------------------------- pack
    def note_optimizer(self, optimizer):
        """The optimizer's parameters (never moved: letting go of them frees nothing; autograd hands the
        hooks detached aliases, so they are known by storage) and its state tensors (Note [Optimizer state])."""
        params = [p for g in optimizer.param_groups for p in g["params"]]
        self._parameters = {_untyped(p).data_ptr() for p in params if p.device.type == self.device_type}
        states = []
        if self.move_optimizer_state:
            for p in params:
                st = optimizer.state.get(p) or {}
                for k in sorted(st):
                    v = st[k]
                    if (isinstance(v, self.torch.Tensor) and v.device.type == self.device_type and
                            v.numel() * v.element_size() >= self.min_bytes and (self.device is None or v.device == self.device)):
                        states.append(v)
        self._state_tensors = states
        if self.stream_step and optimizer not in self._state_hooked:  # Note [Streamed step]
            self._state_hooked.add(optimizer)
            hook = getattr(optimizer, "register_state_dict_pre_hook", None)
            if hook is not None:
                hook(lambda opt: self.bring_state_home(opt))
            else:  # (torch before 2.1)
                plain = optimizer.state_dict
                optimizer.state_dict = lambda: (self.bring_state_home(optimizer), plain())[1]

    def _eligible(self, t):
        torch = self.torch
        device = t.device
        # (the device, once known, is of the device type: torch.device's type costs more than a comparison)
        if device != self.device if self.device is not None else device.type != self.device_type:
            return False
        if type(t) is not torch.Tensor or t.layout != torch.strided or (t.is_leaf and t.requires_grad):
            return False
        return not (t.is_conj() or t.is_neg())  # (torch 1.10 and later)

    def _in_backward(self):
        """Whether autograd is running a backward pass now (a reentrant checkpoint's recomputation saves
        tensors there); a forward after a backward (gradient accumulation) is not."""
        task = self._graph_task_id
        return task() != -1 if task is not None else self._backward

    def _new_record(self, storage, nbytes, key, tensor=None):
        rec = _Record(len(self._by_index), nbytes, key, storage, tensor)
        self._by_index.append(rec)
        if tensor is None:
            self._records[key] = rec
            self.counters.saved_storages += 1
            self.counters.saved_bytes += rec.nbytes
        return rec

    def _start(self):
        """The iteration's first call: the optimizer's state tensors get records, packed here (their copies
        out may start now; they are used at the optimizer step: Note [Optimizer state])."""
        self._started = True
        if self._peak_watch is not None and self._reset_peak is not None:
            # Note [Budget]: a plan's first iteration counts its peaks from its first call, the allocator's cache
            # given back: before it the device held what the iteration before left, one without this plan's
            # moves (the Llama-style decoder's first plan under a streamed step found the gradients and all the
            # optimizer state there, 1.19 GiB over the plan, and planned again lower for nothing:
            # bench/results/gpu-h200-2026-12-06-1, call 1)
            if self._empty_cache is not None:
                self._empty_cache()
            self._reset_peak(self.device)
        away, self._away = self._away, {}
        for v in self._state_tensors:
            storage = self._storage_of(v)
            host = away.pop(id(v), None)
            if host is not None and storage.nbytes() == 0:
                # Note [Streamed step]: the last step sent it out; it starts this iteration away, its copy current
                rec = self._new_record(storage, host[2], storage.data_ptr(), tensor=v)
                rec.host, rec.d2h, rec.moving = host[0], host[1], True
                self._let_go(rec)
            else:
                if host is not None:
                    self.transport.give_back(host[0], host[1])
                rec = self._new_record(storage, storage.nbytes(), storage.data_ptr(), tensor=v)
            self._states.append(rec)
            self._on_call("pack", rec, True)
        for host in away.values():  # state tensors the optimizer no longer has
            self.transport.give_back(host[0], host[1])

    def pack(self, t):
        t0 = _clock()
        try:
            return self._pack(t)
        finally:
            self.counters.host_ms += (_clock() - t0) * 1e3  # the hooks' own cost

    def _pack(self, t):
        self._modules.count_pack()  # a module call running now counts every saved tensor (Note [Module recompute])
        node = t.grad_fn
        if node is not None:
            # An op's own output (PyTorch 2 detaches the others): what the hooks keep must not lead back to
            # the graph that keeps it (a reference cycle only Python's collector would free).
            t = t.detach()
        if self._idle or (self.budget is None and self.fraction is None) or not self._eligible(t):
            return t
        storage = self._storage_of(t)
        nbytes = storage.nbytes()
        if nbytes < self.min_bytes:
            # Never moves: no record and no call (T5-style models save thousands of small storages, and each
            # call costs the host tens of microseconds: bench/results/gpu-h200-2026-12-01-2, call 4).
            return t
        with self._lock:
            if self.device is None:
                self.device = t.device
                self.transport = self._make_transport(t.device)
                self._iteration_start = self.transport.mark()
                self._host_start = _clock()
            if not self._started:
                self._start()
            key = storage.data_ptr()
            rec = self._records.get(key)
            if rec is not None and self.plan is not None and not self._diverged:
                # The recorded iteration says whether this is a storage seen before (a view of it) or a new
                # one at a reused address; follow it (a mismatch either way is a divergence below).
                ev = self._plan_events
                if self._call < len(ev) and ev[self._call][1] == len(self._by_index) and rec.index != len(self._by_index):
                    rec = None
            first = rec is None
            if first:
                rec = self._new_record(storage, nbytes, key)
            h = _Handle(rec, t)
            rec.handles.append(h)
            movable = first and rec.nbytes >= self.min_bytes and key not in self._parameters and not self._in_backward()
            if movable and node is not None and self._recording and _cast_parameter(node) is not None:
                # autocast keeps its cast of a parameter in a cache until its region exits (Note [Recipes])
                rec.held = _autocast_cache_on(self.torch)
            if node is not None and self.recompute and movable and (self._recording or self._remade):
                # Note [Recipes]: what this op made (a recipe's input), and how to make this storage again.
                if len(self._made_by) > 100000:  # forwards with no backward (evaluation with grad on): hold no more
                    self._made_by.clear()
                self._made_by[node] = (rec, h)
                if self._recording or (rec.index in self._remade and rec.index not in self._by_block):
                    try:
                        rec.recipe = _find_recipe(self.torch, node, t, storage, self._made_by, self._remake)
                    except (AttributeError, IndexError, TypeError):  # a node unlike the ones recipes know
                        rec.recipe = None
            modules = self._modules
            if self.recompute and (modules.frame is not None or modules.pending_out or modules.pending_node):
                call = modules.on_pack(rec, first, movable)  # Note [Module recompute]
                if call is None and first and movable and node is not None and modules.pending_node and \
                        modules.frame is None:
                    call = modules.on_cast(rec, node, t)
                if call is not None and rec.recipe is None and rec.index in self._remade and not self._recording \
                        and rec.index not in self._by_block:
                    rec.recipe = modules.recipe(call, rec)
            if self.recompute and modules.block is not None:
                block = modules.on_pack_block(rec, first, movable)  # Note [Block recompute]
                if block is not None and rec.index in self._by_block and not self._recording:
                    rec.recipe = modules.recipe(block, rec)
            self._on_call("pack", rec, movable)
            return h

    def _on_call(self, kind, rec, movable_first_pack):
        """Everything that happens at one pack or unpack call: the plan's (or the reactive) moves, and the
        recorded iteration's sample."""
        i = self._call
        self._call += 1
        self.counters.calls += 1
        if self._events is not None:
            self._sample(kind, rec, movable_first_pack)
        if self._peak_watch is not None:
            self._watch_window()
            self._watch_call = (i, kind, rec.index)
        if self._held_watch:
            self._watch_held(i)
        if self.plan is not None and not self._diverged:
            ev = self._plan_events
            if i >= len(ev) or ev[i][0] != kind or ev[i][1] != rec.index or ev[i][2] != rec.nbytes:
                self._diverge(i, kind, rec, ev[i] if i < len(ev) else None)
            else:
                acts = self._actions.get(i)
                if acts is not None:
                    t0 = _clock()
                    copy, release, fetch, remake = acts
                    by = self._by_index
                    if fetch:
                        self._fetch_many([by[s] for s in fetch])
                    if release:
                        self._release_many([by[s] for s in release])
                    for s in remake:
                        self._let_go_to_remake(by[s])
                    if copy:
                        self._copy_out_many([by[s] for s in copy])
                    c = self.counters  # Note [Host time]
                    c.move_host_ms += (_clock() - t0) * 1e3
                    c.copies_issued += len(copy) + len(fetch)
                return
        if self._pressure and movable_first_pack and rec.tensor is None:
            self._fifo.append(rec)  # Note [Reactive moves]: copied out when it is let go
        if self._pressure and self._fifo:
            live = self._allocated(self.device)
            while self._fifo and live > self.limit:
                old = self._fifo.pop(0)
                if old.released or old is rec or not old.handles or old.index in self._needed or old.storage is None:
                    continue
                self._copy_out(old)
                live -= self._release(old, timed=self._events is not None)

    def _watch_window(self):
        """Note [Budget]: the allocator's peak so far (never reset: the iteration's peak stays whole); where it grew
        past the planned peak, and at each new high after that, the last call's window was over: the first three
        such windows are kept (call, kind, storage, bytes) for _check_planned_peak."""
        peak = int(self._max_allocated(self.device))
        if self._watch_call is not None and peak > max(self.plan["planned_peak"], self._watched_peak) and \
                len(self._peak_watch) < 3:
            self._peak_watch.append(self._watch_call + (peak,))
        self._watched_peak = max(self._watched_peak, peak)

    def _watch_held(self, i):
        """Note [Held storages]: storages let go that were still alive; the first call that finds one freed is its
        held_until."""
        still = []
        for index, ref in self._held_watch:
            if ref.expired():
                self._held_seen[index] = max(self._held_seen.get(index, 0), i)
            else:
                still.append((index, ref))
        self._held_watch[:] = still

    def _plan_with_held(self):
        """Note [Held storages]: after a plan's first iteration, storages the program held past their release get
        held_until in the trace (to the iteration's end: never let go) and the plan is made again at the same
        limit. Returns whether it was."""
        if self._held_watch is None:
            return False
        n = len(self._trace["events"])
        for index, _ in self._held_watch:  # never freed in this iteration's calls
            self._held_seen[index] = n
        self._held_watch = None
        storages = self._trace["storages"]
        new = {s: h for s, h in self._held_seen.items() if h > storages[s].get("held_until", -1)}
        if not new or self.held_replans_left <= 0:
            return False
        self.held_replans_left -= 1
        for s, h in new.items():
            storages[s]["held_until"] = h
        s = max(new, key=lambda s: storages[s]["bytes"])
        self.log("storage mover: %d storage(s) let go were still held by the program (%.2f GiB; the largest, storage "
                 "%d of %.0f MiB, until call %d): planning again with where each is freed (Note [Held storages])"
                 % (len(new), sum(storages[s]["bytes"] for s in new) / float(1 << 30), s,
                    storages[s]["bytes"] / float(1 << 20), new[s]))
        self.held = dict(sorted((s, st["held_until"]) for s, st in enumerate(storages) if "held_until" in st))
        self._make_plan(self.plan["limit_bytes"])
        return True

    def _diverge(self, i, kind, rec, expected):
        self._diverged = True
        self.counters.divergences += 1
        if len(self.history) < 5 or self.iteration % 100 == 0:
            want = "end of the recorded calls" if expected is None else \
                "%s of storage %d (%d bytes)" % (expected[0], expected[1], expected[2])
            self.log("storage mover: call %d (%s of storage %d, %d bytes) does not match the recorded iteration (%s): "
                     "nothing more moves in iteration %d" % (i, kind, rec.index, rec.nbytes, want, self.iteration))

    # ------------------------------------------------------------------------------------- moves
    def _copy_out(self, rec):
        if rec.moving or rec.storage is None:
            return
        rec.host, rec.d2h = self.transport.to_host(self._source(rec.storage))
        self._copied(rec)

    def _copied(self, rec):
        rec.moving = True
        self._out_seq += 1
        rec.out_seq = self._out_seq
        self.counters.bytes_out += rec.nbytes

    # Note [Batched moves]
    # ~~~~~~~~~~~~~~~~~~~~
    # Each copy costs the host the stream switches, the waits and the events around it: ~200 us per storage copied
    # out and back on the H200 (GPT-2 large at checkpointing's peak: 177 ms of hooks' host time an iteration with
    # 637 storages moving, 48 ms with none; T5's ~300 ms with 1135: bench/results/gpu-h200-2026-12-02-4, call 1 and
    # call 3). The plan puts several copies, releases and fetches at one call; those are issued together: copies
    # out (and back) of one call on their stream after one wait for the compute queued so far, with one event after
    # them; a call's releases wait for the newest of their copies out only (the device-to-host stream runs its copies
    # in order, so the others are done by then). A transport without the batch calls (to_host_many,
    # to_device_many) gets them one by one.
    def _source(self, storage):
        """What the transport copies out of a device storage (CudaTransport.source; a flat uint8 tensor for one
        without it)."""
        source = getattr(self.transport, "source", None)
        return source(storage) if source is not None else _flat_bytes(self.torch, storage, self.device)

    def _copies_out(self, flats, into=None):
        """Copies of `flats` out at one call: [(host buffer, event)], one batch where the transport has one. `into`:
        per storage a pinned buffer to copy into (its last copy ordered before the compute queued so far) or None."""
        many = getattr(self.transport, "to_host_many", None)
        if len(flats) > 1 and many is not None:
            hosts, ev = many(flats, into)
            return [(host, ev) for host in hosts]
        return [self.transport.to_host(f, b) for f, b in zip(flats, into or [None] * len(flats))]

    def _copy_out_many(self, recs):
        recs = [r for r in recs if not r.moving and r.storage is not None]
        for r, (host, ev) in zip(recs, self._copies_out([self._source(r.storage) for r in recs])):
            r.host, r.d2h = host, ev
            self._copied(r)

    def _release_many(self, recs):
        recs = [r for r in recs if not r.released and r.moving and r.storage is not None]
        if len(recs) > 1:  # Note [Batched moves]: the newest copy out's end covers the others'
            self._wait(max(recs, key=lambda r: r.out_seq).d2h, False)
        for r in recs:
            self._release(r, waited=len(recs) > 1)

    def _release(self, rec, timed=False, waited=False):
        """Let go of the device storage once its copy out is done (the compute stream waits for it).

        The storage is freed unless something else still holds it (a view the forward keeps, autocast's
        cache); either way its key is forgotten, so a later pack at that address is a new storage (the
        recorded iteration made the same choice). An optimizer state's storage is resized to nothing (its
        tensor stays the optimizer's, Note [Optimizer state]). Returns the bytes let go."""
        if rec.released or not rec.moving or rec.storage is None:
            return 0
        if not waited:
            self._wait(rec.d2h, timed)
        if rec.tensor is not None:
            rec.storage.resize_(0)
        self._let_go(rec)
        return rec.nbytes

    def _let_go_to_remake(self, rec):
        """Note [Recipes]: let go of a storage the plan makes again at its use (no copy, nothing to wait for).
        Without a recipe this iteration (the op was not the recorded one) it stays."""
        if rec.released or rec.storage is None or rec.recipe is None or rec.moving:
            return
        if len(rec.recipe) > 3 and rec.recipe[3].inputs is None and rec.recipe[3].block:
            # its block is still running: its inputs are known when it returns (Note [Block recompute])
            call = rec.recipe[3]
            call.deferred = (call.deferred or []) + [rec]
            return
        self._needed.update(rec.recipe[1])  # what it is made from stays, whatever happens later (a divergence)
        if len(rec.recipe) > 3:
            self._modules.arm(rec.recipe[3])  # a module call holds its inputs until it runs again
        self._let_go(rec)

    def _remake(self, rec):
        """Note [Recipes]: a storage let go to be made again is made on the compute stream (at its use, or where
        a recomputation that reads it is made); it stays until its own use. Returns it (None: it cannot be)."""
        if rec.fetched is None and rec.recipe is not None and not rec.moving:
            if self._remake_marks is not None and not self._remaking:  # Note [Measured recomputation]
                # (a recomputation that makes its inputs first is timed once, whole: its inputs' are inside)
                self._remaking = True
                try:
                    a = self.transport.mark()
                    rec.fetched = rec.recipe[0]()
                    self._remake_marks.append((rec.index, a, self.transport.mark()))
                finally:
                    self._remaking = False
            else:
                rec.fetched = rec.recipe[0]()
            self._absent -= rec.nbytes
            self.counters.recomputed += 1
            self.counters.bytes_recomputed += rec.nbytes
        return rec.fetched

    def _let_go(self, rec):
        """The record drops the device storage and every handle's tensor: what frees it (Note [Storage moves]),
        unless the program holds it too (Note [Held storages])."""
        ref = None
        if self._held_watch is not None and rec.storage is not None and rec.tensor is None and self._call > 0:
            # (an optimizer state's storage is resized to nothing: freed whoever holds it)
            ref = self._weak_ref(rec.storage)
        rec.storage = None
        for h in rec.handles:
            h.t = None
        rec.released = True
        if ref is not None and not ref.expired():
            self._held_watch.append((rec.index, ref))
        if self._records.get(rec.key) is rec:
            del self._records[rec.key]
        self._absent += rec.nbytes
        self._max_absent = max(self._max_absent, self._absent)
        self.counters.released += 1

    def _fetch_many(self, recs):
        """Note [Batched moves]: a call's fetches of saved storages as one batch (optimizer state one by one)."""
        many = getattr(self.transport, "to_device_many", None)
        batch = [r for r in recs if r.released and r.fetched is None and r.host is not None and r.tensor is None]
        if len(batch) < 2 or many is None:
            for r in recs:
                self._fetch(r)
            return
        for r, (flat, ev) in zip(batch, many([(r.host, r.nbytes, r.d2h) for r in batch])):
            self._fetched(r, flat, ev)
        for r in recs:
            if r.tensor is not None:
                self._fetch(r)

    def _fetch(self, rec):
        if not rec.released or rec.fetched is not None or rec.host is None:
            return
        if rec.tensor is not None:  # back into the state tensor's own storage
            storage = self._storage_of(rec.tensor)
            storage.resize_(rec.nbytes)
            self._fetched(rec, *self.transport.to_device_into(rec.host, _flat_bytes(self.torch, storage, self.device),
                                                              rec.d2h))
        else:
            self._fetched(rec, *self.transport.to_device(rec.host, rec.nbytes, rec.d2h))

    def _fetched(self, rec, flat, ev):
        """A copy back was issued: `flat` is the storage's device bytes once `ev` has passed."""
        rec.fetched, rec.h2d = flat, ev
        self._absent -= rec.nbytes
        self.counters.bytes_in += rec.nbytes

    def _wait(self, ev, timed):
        if timed and not self.transport.done(ev):
            a = self.transport.mark()
            self.transport.compute_wait(ev)
            self._stalls.append((self._call - 1, a, self.transport.mark()))
        else:
            self.transport.compute_wait(ev)

    # ------------------------------------------------------------------------------------- unpack
    def unpack(self, x):
        if not isinstance(x, _Handle):
            return x
        t0 = _clock()
        try:
            return self._unpack(x)
        finally:
            self.counters.host_ms += (_clock() - t0) * 1e3

    def _unpack(self, x):
        with self._lock:
            rec = x.rec
            if not self._backward and self._recording:
                # Does autocast's cache outlive forward? Only if backward runs inside the autocast region.
                self._autocast_in_backward = _autocast_on(self.torch, self.device_type)
            self._backward = True
            if self._recording and self._modules.member_call:
                self._modules.on_unpack(rec)  # Note [Module recompute]: where a call would run again
            if self._made_by:
                self._made_by = {}  # recipes are found in forward; the graph's nodes are not held longer
            self._on_call("unpack", rec, False)
            if x.t is not None:
                out = x.t
            else:
                if rec.fetched is None and rec.recipe is not None and not rec.moving:
                    t0 = _clock()
                    self._remake(rec)
                    c = self.counters  # Note [Host time]: a block's run, or a recipe's or module's
                    if rec.index in self._by_block:
                        c.block_host_ms += (_clock() - t0) * 1e3
                        c.block_runs += 1
                    else:
                        c.remake_host_ms += (_clock() - t0) * 1e3
                        c.remakes += 1
                elif rec.fetched is None:
                    self.counters.fetched_late += 1
                    self._fetch(rec)
                if rec.h2d is not None:
                    self._wait(rec.h2d, self._events is not None)
                out = _on_storage(self.torch, self._storage_of(rec.fetched), x.dtype, self.device, x.offset, x.size, x.stride)
            x.t = None
            try:
                rec.handles.remove(x)
            except ValueError:
                pass
            if not rec.handles:
                # Every saved use was handed out: autograd holds what it got and frees it after the use, as
                # without hooks; the record holds nothing more (the pinned buffer goes back to the pool).
                if self._records.get(rec.key) is rec:
                    del self._records[rec.key]
                self._retire(rec)
            return out

    def optimizer_pre_hook(self, optimizer, args, kwargs):
        """torch.optim's step pre-hook (``register_optimizer_step_pre_hook``). Its ``args`` are the step's own,
        the optimizer first: a closure is the second positional argument or the ``closure`` keyword (taking any
        argument for a closure made every streamed step one without streaming on the H200: each state fetched late
        at the step, bench/results/gpu-h200-2026-12-05-1, call 4)."""
        closure = kwargs.get("closure", args[1] if len(args) > 1 else None)
        self.optimizer_begins(optimizer, closure is not None)

    def optimizer_begins(self, optimizer=None, closure=False):
        """Called by the optimizer's pre-step hook: every state tensor let go comes back before the step
        reads it (a fetch the plan did not start yet starts now: late), and the compute stream waits for
        those copies (Note [Optimizer state]); with ``stream_step`` the step updates a chunk at a time instead
        (Note [Streamed step]; not for a step given a closure)."""
        with self._lock:
            if (self._recording or self._timing) and self.transport is not None:
                self._optimizer_start = self.transport.mark()
            chunks = None if closure else self._step_chunks(optimizer)
            for rec in self._states:
                self._on_call("unpack", rec, False)
                if rec.released and chunks is None:
                    if rec.fetched is None:
                        self.counters.fetched_late += 1
                        self._fetch(rec)
                    self._wait(rec.h2d, self._events is not None)
            if chunks is not None:
                self._stream_step(optimizer, chunks)

    # Note [Streamed step]
    # ~~~~~~~~~~~~~~~~~~~~
    # The optimizer step reads parameters, gradients and all of its state at once (AdamW in fp32: 16 bytes a
    # parameter), so with the state fetched before it the step alone needs more than 60% of checkpointing's peak
    # on the bench's 680-778M-parameter models (bench/results/gpu-h200-2026-12-04-1). With ``stream_step`` the
    # pre-step hook updates the parameters itself, a chunk of ~``step_chunk_bytes`` of state at a time, by the
    # optimizer's own update function (the step without its hooks, ``type(opt).step.__wrapped__``) over the
    # param groups narrowed to the chunk; the last chunk is left in the narrowed groups for the optimizer's own
    # step, and the post-step hook restores the groups. Before a chunk's update its state let go by the plan is
    # fetched (the next chunk's is fetched meanwhile); after it, that state is copied out and let go once the
    # chunk after it is updated: a chunk arriving, one updated and one leaving, and the update's temporaries (a
    # chunk's worth: with three chunks counted the Llama-style decoder's plans passed their peak by 0.13 GiB after
    # the step's last call, bench/results/gpu-h200-2026-12-06-1, call 3), the window the plan counts
    # (placer/saved_plan.cpp, Note [Streamed step]). State the plan fetched in backward (what fits there to the
    # iteration's end) is found on the device and stays. The state the step sent out starts the next iteration away
    # (its copy is current: nothing changes it before the next step), so the plan's copy at its pack is already
    # done. Each element's update reads only its own parameter, gradient and state, so chunks give the same
    # bits as one step. ``optimizer.state_dict()`` brings the state home first (a state_dict pre-hook); other
    # code that reads the optimizer's state between steps would find it empty. Off by default. Session 31's H200
    # runs streamed nothing: the pre-hook took the optimizer, the first of the step's arguments, for a closure,
    # so the state was fetched late, all at once (bench/results/gpu-h200-2026-12-05-1, call 4).
    def _step_chunks(self, optimizer):
        """The streamed step's chunks [(group index, parameter, its state records)], or None: no streaming."""
        if not self.stream_step or optimizer is None or not self._states or self._stepping is not None or \
                getattr(type(optimizer).step, "__wrapped__", None) is None:
            return None
        rec_of = {id(r.tensor): r for r in self._states}
        chunks, cur, size = [], [], 0
        for gi, g in enumerate(optimizer.param_groups):
            for p in g["params"]:
                recs = [rec_of[id(v)] for v in (optimizer.state.get(p) or {}).values() if id(v) in rec_of]
                cur.append((gi, p, recs))
                size += sum(r.nbytes for r in recs)
                if size >= self.step_chunk_bytes:
                    chunks.append(cur)
                    cur, size = [], 0
        if cur:
            chunks.append(cur)
        return chunks if len(chunks) > 1 else None

    def _stream_step(self, opt, chunks):
        groups = opt.param_groups
        saved = [g["params"] for g in groups]
        # what the plan in force leaves to the step goes out again after its update (what the plan fetched before
        # the step stays, as without a plan what is back)
        away = {r.index for chunk in chunks for _, _, rs in chunk for r in rs if r.released and r.fetched is None} \
            if self.plan is not None and not self._diverged else set()
        update = type(opt).step.__wrapped__
        timed = self._events is not None
        pending = []  # (records, event) copied out, not let go yet

        def fetch(chunk):
            for _, _, rs in chunk:
                for r in rs:
                    if r.released and r.fetched is None:
                        self._fetch(r)

        self._stepping = (opt, saved, pending, away, chunks[-1])
        try:
            fetch(chunks[0])
            for k, chunk in enumerate(chunks):
                if k + 1 < len(chunks):
                    fetch(chunks[k + 1])
                for _, _, rs in chunk:
                    for r in rs:
                        if r.released and r.fetched is not None:
                            self._wait(r.h2d, timed)
                for gi, g in enumerate(groups):
                    g["params"] = [p for j, p, _ in chunk if j == gi]
                if k + 1 == len(chunks):
                    break  # the optimizer's own step updates the last chunk
                update(opt)
                self._send_out(chunk, away, pending)
                self.counters.step_chunks += 1
        except BaseException:
            for g, ps in zip(groups, saved):
                g["params"] = ps
            self._stepping = None
            raise

    def _send_out(self, chunk, away, pending):
        """Note [Streamed step]: the chunk's state that was away goes out again; the chunk sent before it is let go."""
        recs = [r for _, _, rs in chunk for r in rs if r.index in away]
        if recs:
            # Each state goes out into the pinned buffer it came in from: the copy out waits for the update, which
            # waited for the copy in. (Taking new buffers, while those given back were still in flight, grew the
            # pinned pool by 9-28 MB a step on the Llama-style decoder: bench/results/gpu-h200-2026-12-06-1.)
            into = [r.host if r.host is not None and r.host.numel() == r.nbytes else None for r in recs]
            copies = self._copies_out([self._source(self._storage_of(r.tensor)) for r in recs], into)
            for r, b, (host, ev) in zip(recs, into, copies):
                if r.host is not None and b is None:
                    self.transport.give_back(r.host, r.h2d if r.h2d is not None else r.d2h)
                r.host, r.d2h = host, ev
                self.counters.bytes_out += r.nbytes
            pending.append((recs, copies[-1][1]))  # (the device-to-host stream runs them in order)
        while len(pending) > (1 if recs else 0):
            self._let_out(*pending.pop(0))

    def _let_out(self, recs, ev):
        self._wait(ev, False)
        for r in recs:
            self._storage_of(r.tensor).resize_(0)
            self._away[id(r.tensor)] = (r.host, ev, r.nbytes)
            r.host = r.fetched = None
            self._absent += r.nbytes

    def _finish_step(self):
        """Note [Streamed step]: after the optimizer's own step (the last chunk): the groups as they were, the last
        chunks sent out."""
        opt, saved, pending, away, last = self._stepping
        self._stepping = None
        for g, ps in zip(opt.param_groups, saved):
            g["params"] = ps
        self._send_out(last, away, pending)
        while pending:
            self._let_out(*pending.pop(0))

    def bring_state_home(self, optimizer=None):
        """The optimizer state a streamed step sent out, back into its tensors (``optimizer.state_dict()``'s pre-hook:
        Note [Streamed step]); the compute stream waits for the copies."""
        with self._lock:
            if self._stepping is not None and optimizer is self._stepping[0]:
                self._finish_step()
            ids = None if optimizer is None else {id(v) for st in optimizer.state.values() for v in st.values()}
            tensors = {id(t): t for t in self._state_tensors}
            for key in [k for k in self._away if ids is None or k in ids]:
                host, ev, nbytes = self._away.pop(key)
                v = tensors.get(key)
                if v is None:
                    self.transport.give_back(host, ev)
                    continue
                storage = self._storage_of(v)
                storage.resize_(nbytes)
                _, back = self.transport.to_device_into(host, _flat_bytes(self.torch, storage, self.device), ev)
                self.transport.compute_wait(back)
                self.transport.give_back(host, back)

    # ------------------------------------------------------------------------------ recording
    def _sample(self, kind, rec, movable):
        if self._timing:
            self._events.append({"kind": kind, "storage": rec.index, "bytes": rec.nbytes, "mark": self.transport.mark(),
                                 "call": self._call - 1, "host": _clock()})
            return
        dev = self.device
        peak = self._max_allocated(dev)
        self._reset_peak(dev)
        live = self._allocated(dev)
        if self._events:
            last = self._events[-1]
            last["window_peak"] = max(last["window_peak"], peak + last["absent"])
        seen = self._seen
        while len(seen) <= rec.index:
            r = self._by_index[len(seen)]
            entry = {"bytes": r.nbytes, "movable": False, "optimizer_state": r.tensor is not None}
            if r.recipe is not None:  # Note [Recipes]: bytes read and written at the estimated bandwidth
                entry["recompute_ms"] = (r.recipe[2] + r.nbytes) / self.recompute_bytes_per_s * 1e3
                entry["recompute_from"] = list(r.recipe[1])
            if r.held:
                entry["held_in_forward"] = True
            seen.append(entry)
        if movable:
            seen[rec.index]["movable"] = True
        self._events.append({"kind": kind, "storage": rec.index, "mark": self.transport.mark(), "live": live + self._absent,
                             "window_peak": live + self._absent, "absent": self._absent, "call": self._call - 1})

    def _finish_trace(self, end):
        """The recorded iteration as a SavedTrace (core/saved_trace.hpp): live bytes plus what was away."""
        ev = self._events
        last = ev[-1]
        last["window_peak"] = max(last["window_peak"], self._max_allocated(self.device) + last["absent"])
        times = self._gpu_times(ev, end)
        events = [{"kind": e["kind"], "storage": e["storage"], "t_ms": t, "live": int(e["live"]),
                   "window_peak": int(max(e["window_peak"], e["live"]))} for e, t in zip(ev, times["t_ms"])]
        self._modules.fill_trace(self._seen, self.transport.elapsed_ms)  # Note [Module recompute]
        blocks = self._modules.fill_blocks(self._seen, self.transport.elapsed_ms)  # Note [Block recompute]
        if self._modules.verdicts:
            self.log("storage mover: " + self._modules.summary())
        if self._autocast_in_backward:
            # autocast's cache holds its casts through backward too: letting them go frees nothing (Note [Recipes])
            for st in self._seen:
                if st.pop("held_in_forward", False):
                    st["movable"] = False
        free, total = self.torch.cuda.mem_get_info(self.device) if self.device_type == "cuda" else (0, 0)
        reserved = self.torch.cuda.memory_reserved(self.device) if self.device_type == "cuda" else 0
        self._calibrated = False  # Note [Measured recomputation]: this trace's recompute_ms are estimates
        self._trials_due = []     # (costs measured on the trace before: Note [Measured plans])
        self._incumbent = None
        self._trace = {"storages": list(self._seen), "events": events, "blocks": blocks, "step_ms": times["step_ms"],
                       "optimizer_ms": times["optimizer_ms"], "context_bytes": int(max(total - free - reserved, 0)),
                       "recorded_iteration": self.iteration}
        self._events = None

    def _finish_timing(self, end):
        """Note [Recording]: the GPU times of a timed iteration replace the recorded iteration's, call by call,
        when both made the same calls: the same kind on a storage of the same size at every call; after an earlier
        timed iteration of the same trace, each call keeps the least of their times (the step too, with its
        optimizer step), and so does the host's clock. Returns whether the calls matched. (Storages are numbered
        by first pack, and which of them is a new one at a reused address depends on what was let go: the recorded
        iteration's moves and the timed one's differ, so the numbers may too. The T5-style model at checkpointing's peak kept the recorded, synchronised times that way and
        was predicted at 1827 ms against 655 measured: bench/results/gpu-h200-2026-12-02-3, call 3.)"""
        ev, rec = self._events, self._trace["events"]
        self._events = None
        sizes = self._trace["storages"]
        same = len(ev) == len(rec) and all(a["kind"] == b["kind"] and a["bytes"] == sizes[b["storage"]]["bytes"]
                                           for a, b in zip(ev, rec))
        if not same:
            self.log("storage mover: the timed iteration %d made other calls than the recorded one (%d vs %d): the "
                     "plan uses the %s times" % (self.iteration, len(ev), len(rec), "earlier timed iteration's"
                                                 if "timed_iterations" in self._trace else "recorded iteration's"))
            return False
        times = self._gpu_times(ev, end)
        earlier = "timed_iterations" in self._trace  # an earlier timed iteration's times are in the trace
        host = 0.0
        for e, t, a in zip(rec, times["t_ms"], ev):
            e["t_ms"] = min(e["t_ms"], t) if earlier else t
            if self.host_time and self._host_start is not None:  # Note [Host time]: the host's clock at each call
                host = max((a["host"] - self._host_start) * 1e3, host)
                e["host_ms"] = min(e.get("host_ms", host), host) if earlier else host
        self._host_costs = self._host_measured = None  # measured again for this trace's plans
        if not earlier or times["step_ms"] < self._trace["step_ms"]:
            self._trace["step_ms"], self._trace["optimizer_ms"] = times["step_ms"], times["optimizer_ms"]
        self._trace["timed_iterations"] = self._trace.get("timed_iterations", []) + [self.iteration]
        return True

    def _gpu_times(self, ev, end):
        """GPU times of the calls `ev` from the iteration's start, less the time compute waited for copies."""
        start = self._iteration_start
        el = self.transport.elapsed_ms
        stall_at = {}
        for call, a, b in self._stalls:
            stall_at[call] = stall_at.get(call, 0.0) + el(a, b)
        waited, t_prev, out = 0.0, 0.0, []
        for e in ev:
            waited += stall_at.get(e["call"], 0.0)
            t = max(el(start, e["mark"]) - waited, t_prev)  # a wait at this call ends before its mark
            t_prev = t
            out.append(t)
        step = max(el(start, end) - sum(stall_at.values()), t_prev)
        opt = el(self._optimizer_start, end) if self._optimizer_start is not None else 0.0
        opt = min(max(opt, 0.0), step - t_prev) if step > t_prev else 0.0
        reuse = getattr(self.transport, "reuse_marks", None)
        if reuse is not None:  # the next timed iteration records these again (their times are read)
            reuse([e["mark"] for e in ev] + [m for _, a, b in self._stalls for m in (a, b)] + [self._optimizer_start])
        self._stalls = []
        self._optimizer_start = None
        return {"t_ms": out, "step_ms": step, "optimizer_ms": opt}

    # ----------------------------------------------------------------------------------- planning
    def _make_plan(self, limit=None, trial=None):
        """Plans from the trace under `limit` (None: the budget's). trial: (why, [undo()]) when the plan is made again
        for costs the hooks measured rather than for the budget; the plan it replaces comes back if the new one
        measures longer, and each undo() takes its cost back out of later plans (Note [Measured plans])."""
        if trial is not None and self.plan is not None:  # (_start_trial: only while no other trial runs)
            self._incumbent = {"why": trial[0], "undo": trial[1], "kept": (self.plan, self._actions, self._idle,
                                                                            self.plan_summary, self._saved_options)}
        if self._bandwidth is None:
            self._bandwidth = self.transport.bandwidth()
        if self.budget is None and self.fraction is not None:  # "60%": of the recorded live peak
            peak = max(e["window_peak"] for e in self._trace["events"])
            self.budget = int(self.fraction * peak)
            self.limit = int(self.budget * self.fill)
        natural = max(e["window_peak"] for e in self._trace["events"])
        if limit is None:
            limit = self.limit
            if natural <= self.budget * self.fits_fraction:
                # The run fits its budget with a little to spare for the allocator's rounding: nothing has
                # to move, whatever `fill` asks (GpuRuntimeOptions::fits_fraction). A replan's lower limit stays.
                limit = max(limit, natural)
        limit = int(limit)
        options = {"limit_bytes": limit, "d2h_bytes_per_s": self._bandwidth[0], "h2d_bytes_per_s": self._bandwidth[1],
                   "min_bytes": self.min_bytes, "recompute": self.recompute}
        if self.stream_step:  # Note [Streamed step]: a chunk arriving, one updated, one leaving, its temporaries
            options["stream_window_bytes"] = 4 * self.step_chunk_bytes
        if self._host_costs is not None:  # Note [Host time]
            options["host_ms_per_copy"], options["host_ms_per_remake"] = self._host_costs
        try:
            plan = self._planner(self._trace, options)
        except Exception as e:  # noqa: BLE001 - training goes on, reactive
            self.log("storage mover: no plan (%s): moves stay reactive" % e)
            self.phase = "reactive"
            return
        self.plan = plan
        self._freeze_objects()  # (done at the recorded iteration's end unless a plan came another way)
        self._write_saved(options)
        self._set_remade(plan)
        self._measure_remakes = bool(self._remade)
        self._actions = self._plan_actions(plan)
        self._idle = bool(plan["fits"]) and not plan["moves"]  # nothing to move: the hooks step aside
        self._check_plan = self.replans_left > 0 and not self._idle
        if self._empty_cache is not None:
            self._empty_cache()  # the warm-up's reserved memory goes back: what the plan keeps is what stays
        self._plan_events = [(e["kind"], e["storage"], self._trace["storages"][e["storage"]]["bytes"])
                             for e in self._trace["events"]]
        gib = float(1 << 30)
        self.plan_summary = {"iteration": self.iteration, "limit": limit, "budget": self.budget,
                             "moves": len(plan["moves"]), "bytes_out": plan["bytes_out"], "bytes_in": plan["bytes_in"],
                             "bytes_recomputed": plan.get("bytes_recomputed", 0),
                             # Note [Block recompute]: what running blocks again makes, and how many blocks
                             "blocks_run": len({self._trace["storages"][s]["block"] for s in self._by_block}),
                             "bytes_by_block": sum(self._trace["storages"][s]["bytes"] for s in self._by_block),
                             "bytes_needed": plan["bytes_needed"], "planned_peak": plan["planned_peak"],
                             "fits": plan["fits"], "predicted_ms": plan["predicted_ms"], "bound_ms": plan["bound_ms"],
                             "step_ms": self._trace["step_ms"], "bandwidth": list(self._bandwidth),
                             "saved_storages": len(self._trace["storages"]),
                             "context_bytes": self._trace["context_bytes"],
                             # Note [Streamed step]: the optimizer state the step fetches and sends out itself
                             "bytes_streamed": sum(self._trace["storages"][m["storage"]]["bytes"] for m in plan["moves"]
                                                   if self.stream_step and m["fetch_at"] < 0 and not m.get("recompute")
                                                   and self._trace["storages"][m["storage"]].get("optimizer_state"))}
        # limit:hard is the user's promise that the run stays under the budget: a plan that does not fit
        # keeps the limit too, and the allocation past it raises torch.OutOfMemoryError (Note [Budget]).
        self._allocator_limit(self.budget)
        self.log("storage mover: plan from iteration %d: %d of %d storages leave the device (%.2f GiB each way; "
                 "the limit needs %.2f GiB), live peak %.2f GiB under %.2f GiB%s; predicted step %.1f ms "
                 "(recorded %.1f ms, transfer bound %.1f ms)"
                 % (self.iteration, len(plan["moves"]), len(self._trace["storages"]), plan["bytes_out"] / gib,
                    plan["bytes_needed"] / gib, plan["planned_peak"] / gib, limit / gib,
                    "" if plan["fits"] else
                    " (DOES NOT FIT: not enough saved bytes can move; %s%s)" % (
                        "limit:hard keeps the budget as PyTorch's memory limit, so expect torch.OutOfMemoryError"
                        if self.hard_limit and self._set_limit is not None else "the run goes over the budget",
                        self._streaming_hint()),
                    plan["predicted_ms"], self._trace["step_ms"], plan["bound_ms"]))

    def _streaming_hint(self):
        """Where no plan fits and the optimizer step reads its state whole: what would stream it (Note [Streamed
        step]). HF GPT-2 large and the Llama-style decoder at 60% of checkpointing's peak fit no plan with the whole
        step, whose parameters, gradients and AdamW state are about that budget (bench/results/gpu-h200-2026-12-09-1,
        call 1); the Llama-style decoder ran within it streamed, under limit:hard (calls 2-3)."""
        if self.stream_step:
            return ""
        state = sum(st["bytes"] for st in self._trace["storages"] if st.get("optimizer_state"))
        if not state:
            return ""
        return ("; the optimizer step reads its %.2f GiB of state whole: TIERPACK_GPU step:stream%s streams it a chunk "
                "at a time" % (state / float(1 << 30), "" if self.hard_limit else ",limit:hard"))

    def _set_remade(self, plan):
        """What the plan in force makes again (Note [Recipes]), and which block calls it runs again (Note [Block
        recompute])."""
        moves = plan["moves"] if plan is not None else ()
        self._remade = frozenset(m["storage"] for m in moves if m.get("recompute"))
        self._by_block = frozenset(m["storage"] for m in moves if m.get("by_block"))
        self._modules.planned_blocks = frozenset(
            k for k, members in self._modules.recorded_blocks.items() if members & self._by_block)

    def _freeze_objects(self):
        """Note [Python's collector]: once, at the first plan."""
        if not self.gc_freeze or self._frozen:
            return
        self._frozen = True
        gc.collect()
        gc.freeze()
        self.log("storage mover: Python's collector leaves the %d objects alive at the end of iteration %d out of its "
                 "later collections (gc.freeze; TIERPACK_GPU gc:as-is leaves it as it was: Note [Python's collector])"
                 % (gc.get_freeze_count(), self.iteration))

    def _check_planned_peak(self):
        """Note [Budget]: a live peak over the planned one lowers the limit by the difference and plans again.
        Returns whether it did."""
        measured = self.counters.peak_live
        over = measured - self.plan["planned_peak"]
        if over <= 0 or not self.plan["fits"] or measured <= self.plan["limit_bytes"] * (1 + self.PEAK_SLACK):
            return False
        self.replans_left -= 1
        limit = self.plan["limit_bytes"] - over
        where = ""
        if self._peak_watch:
            where = " (first in the window after call %s)" % ", ".join(
                "%d, %s of storage %d: %.2f GiB" % (c, k, s, b / float(1 << 30)) for c, k, s, b in self._peak_watch)
        self.over_planned = list(self._peak_watch or ())
        self.log("storage mover: the live peak %.2f GiB passed the planned %.2f GiB%s: planning again under %.2f GiB"
                 % (measured / float(1 << 30), self.plan["planned_peak"] / float(1 << 30), where,
                    limit / float(1 << 30)))
        if limit > 0:
            self._make_plan(limit)
        return True

    def _check_reserved(self):
        """Note [Reserved memory]: memory the allocator holds over the budget lowers the limit by as much (by half of
        ROOM_FRACTION of the budget at least) and plans again (at most ``reserved_replans`` times)."""
        if self._max_reserved is None or not self.budget or not self.plan["fits"] or \
                (self.hard_limit and self._set_limit is not None):
            return  # under a hard limit the allocator itself keeps what it holds under the budget
        over = self.counters.peak_reserved - self.budget
        if over <= 0:
            self._raise_limit(-over)
            return
        gib = float(1 << 30)
        # by half the room that would raise it again at least: the T5-style model's plans were made again four times
        # for 0.02-1.35 GiB over its 29.33 GiB budget, each a little lower, into the timed iterations
        # (bench/results/gpu-h200-2026-12-07-1, call 2)
        limit = self.plan["limit_bytes"] - max(over, int(self.budget * self.ROOM_FRACTION / 2))
        if self.reserved_replans_left <= 0 or limit <= 0:
            if not getattr(self, "_reserved_warned", False):
                self._reserved_warned = True
                self.log("storage mover: PyTorch's allocator holds %.2f GiB, %.2f GiB over the budget, with %.2f GiB "
                         "live (fragmentation, Note [Reserved memory]); no replan left: the run stays over its "
                         "budget" % (self.counters.peak_reserved / gib, over / gib, self.counters.peak_live / gib))
            return
        self.reserved_replans_left -= 1
        self.log("storage mover: PyTorch's allocator held %.2f GiB (%.2f GiB live) over a %.2f GiB budget: planning "
                 "again under %.2f GiB of live bytes" % (self.counters.peak_reserved / gib, self.counters.peak_live / gib,
                                                         self.budget / gib, limit / gib))
        kept = (self.plan, self._actions, self._idle, self.plan_summary)
        self._make_plan(limit)
        if self.plan is not None and not self.plan["fits"]:
            # Not enough movable bytes under the lower limit: the plan that fitted stays (a plan that does
            # not fit leaves live bytes over its limit wherever it falls short).
            self.plan, self._actions, self._idle, self.plan_summary = kept
            self._set_remade(self.plan)
            self._check_plan = False
            self.reserved_replans_left = 0
            self.log("storage mover: no plan fits under %.2f GiB (too few movable bytes): the plan under %.2f GiB "
                     "stays, and the run stays %.2f GiB over the budget" % (limit / gib, self.plan["limit_bytes"] / gib,
                                                                          over / gib))

    def _raise_limit(self, room):
        """Note [Reserved memory]: a limit lowered below the budget's (for a passed peak or what the allocator held)
        whose plan now holds less than the budget by more than ROOM_FRACTION of it, in an iteration after the plan's
        first, is raised by half that room (no higher than the budget's) and the plan made again, at most
        ``room_replans`` times: on the Llama-style decoder at 60% of checkpointing's peak the replans of plan
        changes left the limit at 8.88 GiB while the allocator then held 9.71 of an 11.01 GiB budget
        (bench/results/gpu-h200-2026-12-06-1, call 1)."""
        limit = self.plan["limit_bytes"]
        if self.room_replans_left <= 0 or limit >= self.limit or room < self.budget * self.ROOM_FRACTION or \
                self.plan_summary is None or self.iteration <= self.plan_summary["iteration"] + 1:
            return
        self.room_replans_left -= 1
        raised = min(self.limit, limit + room // 2)
        gib = float(1 << 30)
        self.log("storage mover: PyTorch's allocator held %.2f GiB, %.2f GiB under the %.2f GiB budget: planning again "
                 "under %.2f GiB of live bytes (was %.2f)" % (self.counters.peak_reserved / gib, room / gib,
                                                              self.budget / gib, raised / gib, limit / gib))
        kept = (self.plan, self._actions, self._idle, self.plan_summary)
        self._make_plan(raised)
        if self.plan is None or not self.plan["fits"]:  # (cannot be: a higher limit fits what a lower one did)
            self.plan, self._actions, self._idle, self.plan_summary = kept
            self._set_remade(self.plan)

    def _plan_actions(self, plan):
        """Per call: (storages copied out, let go after their copy, fetched, let go to be made again) there."""
        acts = {}
        for m in plan["moves"]:
            slots = ((3, m["release_at"]),) if m.get("recompute") else \
                ((0, m["copy_at"]), (1, m["release_at"]), (2, m["fetch_at"]))
            for slot, at in slots:
                if at >= 0:
                    a = acts.setdefault(at, ([], [], [], []))
                    a[slot].append(m["storage"])
        return acts

    # ------------------------------------------------------------------------------------- install
    def install(self):
        """Makes pack/unpack autograd's default saved-tensor hooks on this thread (for good), and follows module
        calls (Note [Module recompute])."""
        self.torch._C._autograd._push_saved_tensors_default_hooks(self.pack, self.unpack)
        self.watch_modules()

    def watch_modules(self):
        """Global module hooks that let saved storages be made again by running their module again (Note [Module
        recompute]); only with recompute on. Returns the hooks' handles (remove() them to stop)."""
        if self.recompute and not self._module_hooks:
            self._module_hooks = self._modules.install()
        return self._module_hooks

    def stats(self):
        with self._lock:
            return {"mechanism": "storage", "phase": self.phase, "budget": self.budget, "limit": self.limit,
                    "plan": self.plan_summary, "iterations": list(self.history), "current": self.counters.as_dict(),
                    "out_of_memory": self.out_of_memory_state, "over_planned": self.over_planned,
                    "held": self.held, "held_replans": self.HELD_REPLANS - self.held_replans_left,
                    "trials": list(self.trials)}

    def _stats_path(self, suffix):
        """<stats without its extension>.gpu<N><suffix>: the files beside `tierpack run --stats`."""
        base = self.stats_out
        slash, dot = base.rfind("/"), base.rfind(".")
        if dot > slash:
            base = base[:dot]
        return "%s.gpu%d%s" % (base, self.device.index if self.device.index is not None else 0, suffix)

    def _write_json(self, path, doc):
        import os

        try:
            with open(path + ".tmp", "w") as f:
                json.dump(doc, f)
            os.replace(path + ".tmp", path)
        except OSError as e:
            if not getattr(self, "_stats_failed", False):
                self._stats_failed = True
                self.log("storage mover: cannot write %s: %s" % (path, e))

    def _write_saved(self, options, measured=None):
        """The recorded iteration and the plan made from it (<stats>.gpu<N>.saved.json): what `tierpack
        gpu-replay` plans again offline at other budgets (docs/formats.md, "GPU tier's recorded iteration")."""
        self._saved_options = options
        if not self.stats_out or self.device is None:
            return
        doc = {"format": "tierpack-gpu-saved", "version": 1, "budget": int(self.budget or 0), "fill": self.fill,
               "trace": {k: v for k, v in self._trace.items() if k in ("storages", "events", "blocks", "step_ms",
                                                                     "optimizer_ms", "context_bytes")},
               "options": options, "plan": self.plan}
        if measured is not None:
            doc["recomputations"] = measured  # Note [Measured recomputation]
        self._write_json(self._stats_path(".saved.json"), doc)

    def _write_stats(self):
        """The GPU statistics file `tierpack run` reads (<stats>.gpu<N>.json, as the vmm runtime writes it)."""
        index = self.device.index if self.device.index is not None else 0
        path = self._stats_path(".json")
        last = self.history[-1] if self.history else {}
        doc = {"device": index, "mechanism": "storage", "phase": self.phase, "budget": self.budget or 0,
               "plan": self.plan_summary,
               "iterations": [{"iteration": h["iteration"], "mode": h["mode"], "bytes_to_host": h["bytes_out"],
                               "bytes_to_device": h["bytes_in"], "stalls": h["fetched_late"],
                               "divergences": h["divergences"], "peak_live": h["peak_live"],
                               "peak_reserved": h["peak_reserved"], "recomputed": h["recomputed"],
                               "bytes_recomputed": h["bytes_recomputed"], "host_ms": h["host_ms"],
                               "gc_ms": h["gc_ms"], "gc_full": h["gc_full"], "pinned_new": h["pinned_new"],
                               "step_chunks": h["step_chunks"], "step_ms": h.get("step_ms"),
                               **{k: h[k] for k in ("move_host_ms", "copies_issued", "remake_host_ms", "remakes",
                                                    "block_host_ms", "block_runs")}}
                              for h in self.history]}
        if last.get("diverged") and self.plan is None:
            doc["divergence"] = "iterations stopped matching the recorded one"
        if self.out_of_memory_state is not None:
            doc["out_of_memory"] = self.out_of_memory_state
        if self.recomputations is not None:
            doc["recomputations"] = self.recomputations
        if self.over_planned:
            doc["over_planned"] = [list(w) for w in self.over_planned]  # Note [Budget]
        if self.held:
            doc["held"] = {str(k): v for k, v in self.held.items()}  # Note [Held storages]
        if self.trials:
            doc["trials"] = self.trials  # Note [Measured plans]
        self._write_json(path, doc)

    def trace(self):
        """The recorded iteration (a SavedTrace as a dict), or None."""
        return self._trace


def plan_with_library(lib):
    """planner(trace, options) for StorageMover: the placer through libtierpack_cuda.so's C ABI (`lib` as
    tierpack/_native.py's cuda_library() loads it)."""
    fn = lib.tierpack_plan_saved

    def planner(trace, options):
        out = fn(json.dumps(trace).encode(), json.dumps(options).encode())
        if out is None:
            raise ValueError(lib.tierpack_gpu_last_error().decode())
        return json.loads(out.decode())

    return planner
