"""The GPU tier's storage mover: saved activations leave the device and come back through autograd's
saved-tensor hooks, as whole storages, in stream order, at the points the placer's plan names.

Installed by ``tierpack.cuda.install()`` (the default GPU mechanism, ``TIERPACK_GPU=mechanism:storage``).
PyTorch's own caching allocator stays the CUDA allocator: its statistics, ``torch.OutOfMemoryError`` and
CUDA graphs work as without tierpack; the budget is its memory limit (Note [Budget]).

The mover's parts, each in a file of this package named for it (StorageMover below is the hooks, the records and
the moves; each other part is a mixin of it or plain functions, and its docstring says which of the mover's state it
owns and which it reads):

* activations.py: the saved-tensor hooks, records and moves (Notes [Storage moves], [Reactive moves], [Batched moves]);
* recording.py: the recorded and timed iterations, the trace the plans are made from (Note [Recording]), what
  torch.compile's graphs saved (Note [Under torch.compile]);
* planning.py: the plan through the placer's C ABI (``plan_with_library``) and the actions at each call;
* budget.py: the budget's limit, limit:hard, a plan's first iteration checked (Notes [Budget], [Held storages]);
* reserved_memory.py: what PyTorch's allocator holds against the budget (Note [Reserved memory]);
* recipes.py: saved storages made again from what stays on the device (Note [Recipes]); module_recompute.py: by
  running a module or a block again (Notes [Module recompute], [Block recompute]);
* measured_plans.py: the costs the hooks measure and the plans on trial (Notes [Measured plans], [Measured
  recomputation]);
* optimizer_state.py: the optimizer's state moved, the streamed step (Notes [Optimizer state], [Streamed step]);
* python_collector.py: Python's collector counted and frozen (Note [Python's collector]);
* mover_stats.py: the counters, the history, and the files beside ``tierpack run --stats``;
* copy_streams.py: the copies themselves (the transport).

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

What never moves: storages under ``min_bytes`` (1 MiB; the hooks hand them back at once, untraced), the optimizer's parameters (known by their
storage from the optimizer-step hook: letting go of them frees nothing), tensors that are not plain
strided tensors of the device (subclasses, conjugate or negative views, sparse), and storages first saved
during backward (a reentrant checkpoint's recomputation). Only tensors saved on the thread that installed
the hooks are seen (autograd's default hooks are per thread); under ``torch.utils.checkpoint`` the
checkpoint's own hooks hold what is saved inside a checkpointed region.
"""

from __future__ import annotations

import sys
import threading
from time import perf_counter as _clock

from tierpack._storage import autocast_cache_on as _autocast_cache_on
from tierpack._storage import autocast_on as _autocast_on
from tierpack._storage import flat_bytes as _flat_bytes
from tierpack._storage import on_storage as _on_storage
from tierpack._storage import storage_getter
from tierpack.budget import Budget
from tierpack.measured_plans import MeasuredPlans
from tierpack.module_recompute import ModuleRecompute
from tierpack.mover_stats import Counters, MoverStats
from tierpack.optimizer_state import OptimizerState
from tierpack.planning import Planning
from tierpack.python_collector import PythonCollector
from tierpack.recipes import cast_parameter, find_recipe
from tierpack.recording import Recording, saved_by_compiled_graph
from tierpack.reserved_memory import ReservedMemory

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


class StorageMover(Recording, Planning, Budget, ReservedMemory, MeasuredPlans, OptimizerState, PythonCollector,
                   MoverStats):
    """The pack/unpack hooks, their recorded iteration and the plan they follow (Note [Storage moves]).

    torch: the torch module; transport(device): the copier (copy_streams.CudaTransport, or a test double
    with its methods); planner(trace_dict, options_dict) -> plan dict (the placer through the C ABI);
    budget_bytes: the allocator's budget, or budget_fraction: of the recorded iteration's live peak (None
    for both: nothing moves); allocated(dev), max_allocated(dev), reset_peak(dev): the allocator's live
    bytes, its peak since the last reset, reset; set_limit(dev, bytes or None): make the budget a hard
    limit (or lift it; limit:hard only); empty_cache(): give the allocator's unused memory back;
    memory_state(dev): the allocator's reserved and live bytes and its free gaps, read at an out-of-memory
    error; alloc_retries(dev): the allocator's retries so far (Note [Allocator retries]); record_iteration: the
    iteration (1-based) that is recorded (>= 3 by default: the first learns the live peak, the second moves
    reactively and so fills the pinned pool with what the budget needs away, Note [Reactive moves]; the next
    timed_iterations are timed, Note [Recording]); capacity(dev): the device's memory (the timed iterations move
    nothing under it);
    optimizer_state: move the
    optimizer's state tensors too (Note [Optimizer state]): only where optimizer_begins(opt) runs before
    every step (tierpack.cuda registers it as a global optimizer pre-step hook).
    """

    def __init__(self, torch, transport, planner, budget_bytes, allocated, max_allocated, reset_peak, *,
                 fill, fits_fraction, divergences,  # the settings' (tierpack.cuda.settings(): one default each)
                 set_limit=None, record_iteration=3, device_type="cuda", min_bytes=MiB,
                 replans=2, hard_limit=False, budget_fraction=None, stats_out="",
                 empty_cache=None, optimizer_state=False, capacity=None, log=None, max_reserved=None,
                 reserved_replans=4, room_replans=2, recompute=True, recompute_bytes_per_s=2e12, memory_state=None,
                 gc_freeze=False, recompute_blocks=True, host_time=True, timed_iterations=2,
                 stream_step=False, step_chunk_bytes=128 << 20, stats_every_s=1.0, alloc_retries=None,
                 retry_replans=2):
        self.torch = torch
        self.recompute_blocks = bool(recompute_blocks)  # Note [Block recompute] in module_recompute.py
        self._pinned_before = 0   # the transport's pinned bytes at the iteration's start
        self._storage_of = storage_getter(torch)  # untyped() in one call (the hooks' host time: Note [Storage moves])
        self._graph_task_id = getattr(torch._C, "_current_graph_task_id", None)
        self._make_transport = transport
        self._allocated, self._max_allocated, self._reset_peak = allocated, max_allocated, reset_peak
        self._empty_cache = empty_cache
        self.device_type = device_type
        self.min_bytes = min_bytes
        self.max_divergences = max(1, int(divergences))
        self.recompute = bool(recompute)
        self.recompute_bytes_per_s = float(recompute_bytes_per_s)
        self._out_seq = 0              # copies out issued so far (Note [Batched moves])
        self.log = log or (lambda msg: sys.stderr.write("tierpack: " + msg + "\n"))
        self.transport = None
        self.device = None
        self._lock = threading.RLock()
        self.iteration = 1
        self.phase = "warm-up"
        self._pressure = False        # reactive moves in this iteration (Note [Reactive moves])
        self._diverged_in_a_row = 0
        # Note [Autocast's cache] (cuda.py): called at the end of the iteration before the recorded one when that
        # iteration's live peak does not fit the budget; None: nothing to decide
        self.autocast_cache_off = None
        self._init_recording(record_iteration, timed_iterations, capacity)
        self._init_planning(planner)
        self._init_budget(budget_bytes, budget_fraction, fill, fits_fraction, hard_limit, set_limit, replans,
                          memory_state)
        self._init_reserved_memory(max_reserved, reserved_replans, room_replans, alloc_retries, retry_replans)
        self._init_measured_plans(host_time)
        self._init_optimizer_state(optimizer_state, stream_step, step_chunk_bytes)
        self._init_collector(gc_freeze)
        self._init_stats(stats_out, stats_every_s)
        self._modules = ModuleRecompute(self)  # Note [Module recompute]
        self._module_hooks = []
        self._shielded = False  # the hooks pushed again through torch.compiler.disable (shield_from_compiler)
        self._begin_iteration()
        self._count_collections()

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
        self.counters = Counters()
        self._begin_recording()
        self._made_by = {}        # forward: autograd node -> (record, handle) of what it made (Note [Recipes])
        self._needed = set()      # storages a let-go storage will be made from: never let go (Note [Recipes])
        self._max_absent = 0
        self._begin_plan_check()
        self._begin_remake_timing()
        self._modules.begin_iteration()
        if self.plan is not None:
            self.phase = "planned"
        if self._reset_peak is not None and self.device is not None:
            self._reset_peak(self.device)

    def _decide_autocast_cache(self):
        """Note [Autocast's cache] (cuda.py): off when this iteration's live peak passes the share of the budget
        under which nothing moves (or the budget waits for the recorded peak)."""
        turn_off, self.autocast_cache_off = self.autocast_cache_off, None
        peak, gib = self.counters.peak_live + self._max_absent, 2**30  # (what reactive moves took away too)
        if self.budget is not None and peak <= self.fits_fraction * self.budget:
            self.log("storage mover: autocast keeps its cache of casts of parameters (gpu_autocast_cache:auto): "
                     "iteration %d's live peak %.2f GiB fits %.2f GiB of the budget" %
                     (self.iteration, peak / gib, self.fits_fraction * self.budget / gib))
            return
        turn_off()

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
                self._count_retries()
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
                self._check_retries(measured)
            if self.plan is not None and self._diverged:
                self._diverged_in_a_row += 1
                if self._diverged_in_a_row >= self.max_divergences:
                    self.log("storage mover: %d iterations in a row did not match the recorded one: recording "
                             "iteration %d again" % (self._diverged_in_a_row, self.iteration + 1))
                    self._drop_plan()
                    self.record_iteration = self.iteration + 1
            elif self.plan is not None:
                self._diverged_in_a_row = 0
            if self.autocast_cache_off is not None and self.iteration >= self.record_iteration - 1:
                self._decide_autocast_cache()
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
            self._queue_remake_times(d)
            del self.history[:-200]
            self._release_all()
            self._stats_due()  # Note [Statistics file]
            self.iteration += 1
            # The next iteration starts now, after this bookkeeping (a recorded iteration's ends with a
            # synchronisation per call): marked at the top, the timed iteration's GPU times counted the GPU
            # idling through it (the likely cause of its 240 ms against the default's 144 ms on GPT-2 large,
            # bench/results/gpu-h200-2026-12-01, call 4; not measured again since).
            self._iteration_start = self.transport.mark() if self.transport is not None else None
            self._host_start = _clock()
            self._begin_iteration()

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

    # --------------------------------------------------------------------------------------- pack
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
        self._pack_states()

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
                if self._recording and saved_by_compiled_graph():  # Note [Under torch.compile]
                    self._compiled_saves[0] += 1
                    self._compiled_saves[1] += nbytes
            h = _Handle(rec, t)
            rec.handles.append(h)
            movable = first and rec.nbytes >= self.min_bytes and key not in self._parameters and not self._in_backward()
            if movable and node is not None and self._recording and cast_parameter(node) is not None:
                # autocast keeps its cast of a parameter in a cache until its region exits (Note [Recipes])
                rec.held = _autocast_cache_on(self.torch)
            if node is not None and self.recompute and movable and (self._recording or self._remade):
                # Note [Recipes]: what this op made (a recipe's input), and how to make this storage again.
                if len(self._made_by) > 100000:  # forwards with no backward (evaluation with grad on): hold no more
                    self._made_by.clear()
                self._made_by[node] = (rec, h)
                if self._recording or (rec.index in self._remade and rec.index not in self._by_block):
                    try:
                        rec.recipe = find_recipe(self.torch, node, t, storage, self._made_by, self._remake)
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
        watch = self._held_watch is not None and self._call > 0
        if (watch or (self._recording and self._weak_ref is not None)) and rec.storage is not None and \
                rec.tensor is None:
            # (an optimizer state's storage is resized to nothing: freed whoever holds it)
            ref = self._weak_ref(rec.storage)
        rec.storage = None
        for h in rec.handles:
            h.t = None
        rec.released = True
        if ref is not None and not ref.expired():
            if watch:
                self._held_watch.append((rec.index, ref))
            if self._recording:  # Note [Recording]: the allocator still counts it
                self._recorded_held.append((ref, rec.nbytes))
        if self._records.get(rec.key) is rec:
            del self._records[rec.key]
        self._absent += rec.nbytes
        self._max_absent = max(self._max_absent, self._absent)
        self.counters.released += 1

    def _fetch_many(self, recs):
        """Note [Batched moves]: a call's fetches as two batches: saved storages into new device bytes, optimizer
        state back into its own storages (resized first). A transport without to_device_many / to_device_into_many
        gets them one by one."""
        todo = [r for r in recs if r.released and r.fetched is None and r.host is not None]
        saved = [r for r in todo if r.tensor is None]
        many = getattr(self.transport, "to_device_many", None)
        if len(saved) > 1 and many is not None:
            for r, (flat, ev) in zip(saved, many([(r.host, r.nbytes, r.d2h) for r in saved])):
                self._fetched(r, flat, ev)
        else:
            for r in saved:
                self._fetch(r)
        state = [r for r in todo if r.tensor is not None]
        into_many = getattr(self.transport, "to_device_into_many", None)
        if len(state) > 1 and into_many is not None:
            items = [(r.host, self._state_destination(r), r.d2h) for r in state]
            for r, (flat, ev) in zip(state, into_many(items)):
                self._fetched(r, flat, ev)
        else:
            for r in state:
                self._fetch(r)

    def _fetch(self, rec):
        if not rec.released or rec.fetched is not None or rec.host is None:
            return
        if rec.tensor is not None:  # back into the state tensor's own storage
            self._fetched(rec, *self.transport.to_device_into(rec.host, self._state_destination(rec), rec.d2h))
        else:
            self._fetched(rec, *self.transport.to_device(rec.host, rec.nbytes, rec.d2h))

    def _state_destination(self, rec):
        """An optimizer state's own storage, resized back for its copy back: its device bytes."""
        storage = self._storage_of(rec.tensor)
        storage.resize_(rec.nbytes)
        return _flat_bytes(self.torch, storage, self.device)

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

    # ------------------------------------------------------------------------------------- install
    def install(self):
        """Makes pack/unpack autograd's default saved-tensor hooks on this thread (for good), and follows module
        calls (Note [Module recompute])."""
        self.torch._C._autograd._push_saved_tensors_default_hooks(self.pack, self.unpack)
        self.watch_modules()

    def shield_from_compiler(self):
        """At the first torch.compile call: the pack and unpack hooks again, through torch.compiler.disable, so that
        Dynamo never traces them where a compiled module runs eager code between its graphs (it did, and failed on a
        storage's attribute, with a graph per block: Note [Compile per block] in compile_split.py). Eager code
        without compile keeps the bare hooks (the wrapper costs host time at every pack and unpack). Returns
        whether the hooks are shielded."""
        if self._shielded:
            return True
        ag, torch = self.torch._C._autograd, self.torch
        disable = getattr(getattr(torch, "compiler", None), "disable", None)
        top = getattr(ag, "_top_saved_tensors_default_hooks", None)
        hooks = top(True) if top is not None else None
        if disable is None or hooks is None or tuple(hooks) != (self.pack, self.unpack):
            self.log("storage mover: torch.compile was called with other saved-tensor hooks above tierpack's (or "
                     "this torch cannot say which): Dynamo may trace tierpack's hooks in eager code between graphs")
            return False
        ag._pop_saved_tensors_default_hooks()
        ag._push_saved_tensors_default_hooks(disable(self.pack), disable(self.unpack))
        self._shielded = True
        return True

    def watch_modules(self):
        """Global module hooks that let saved storages be made again by running their module again (Note [Module
        recompute]); only with recompute on. Returns the hooks' handles (remove() them to stop)."""
        if self.recompute and not self._module_hooks:
            self._module_hooks = self._modules.install()
        return self._module_hooks
