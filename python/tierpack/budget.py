"""The storage mover's budget: the limit on live bytes its plans keep, PyTorch's memory limit under limit:hard, and
what a plan's first iteration checks before it is trusted (Notes [Budget], [Held storages]).

The Budget mixin of StorageMover (activations.py). Owns: budget, fraction, fill, limit, fits_fraction, hard_limit,
_set_limit and _limit_in_force (the allocator's limit), replans_left, held_replans_left, _check_plan (the plan's first
iteration is checked), over_planned, held, out_of_memory_state, _memory_state, _weak_ref; per iteration
(_begin_plan_check): _peak_watch, _watched_peak, _watch_call, _held_watch, _held_seen (the core's _let_go adds to
_held_watch). Reads plan, the trace, counters and the allocator's peak; plans again through _make_plan (planning.py).
What the allocator holds beyond live bytes is reserved_memory.py's.

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
"""

from __future__ import annotations

from tierpack._storage import weak_ref as _storage_weak_ref


class Budget:
    """StorageMover's budget and the checks of a plan's first iteration (Notes [Budget], [Held storages])."""

    HELD_REPLANS = 4  # plans made again for storages the program held, at most (Note [Held storages])
    # A first planned iteration's live peak this far over the limit (a fraction of it) plans nothing again (Note
    # [Budget]): the H200 runs of session 31 planned again for passes of 0.01-0.02 GiB of 9.5-17.8 GiB, each replan
    # an iteration of new allocations after empty_cache, for a limit lower by as little
    PEAK_SLACK = 0.005

    def _init_budget(self, budget_bytes, budget_fraction, fill, fits_fraction, hard_limit, set_limit, replans,
                     memory_state):
        self.budget = int(budget_bytes) if budget_bytes else None
        self.fraction = float(budget_fraction) if budget_fraction and not self.budget else None
        self.fill = fill
        self.limit = int(self.budget * fill) if self.budget else None
        self.fits_fraction = fits_fraction  # a recorded live peak under this much of the budget moves nothing
        self.hard_limit = hard_limit
        self._set_limit = set_limit
        self._limit_in_force = None  # what _set_limit last made the allocator's limit
        self.replans_left = int(replans)
        self._check_plan = False      # the first planned iteration: compare its peak with the plan's
        self.over_planned = []  # Note [Budget]: (call, kind, storage, bytes) of the first windows over the planned peak
        self.held = {}  # Note [Held storages]: storage index -> the call until which the program held it
        self.held_replans_left = self.HELD_REPLANS
        self._weak_ref = _storage_weak_ref(self.torch)
        self._memory_state = memory_state
        self.out_of_memory_state = None  # the allocator's state at an out-of-memory error (memory_state(dev))

    def _begin_plan_check(self):
        # Note [Budget]: the first planned iteration of each plan reads the allocator's peak at every call, to say
        # where its live bytes first passed the planned peak (the call whose window it was)
        self._peak_watch = [] if (self.plan is not None and self._check_plan and self.device is not None) else None
        self._watched_peak = 0
        self._watch_call = None
        # Note [Held storages]: and which storages it let go stayed, held by the program (index -> the call by
        # which each was freed)
        self._held_watch = [] if self._peak_watch is not None and self._weak_ref is not None else None
        self._held_seen = {}

    def _allocator_limit(self, limit):
        """Under limit:hard, `limit` (None: none) becomes PyTorch's memory limit, if it is not already."""
        if self._set_limit is not None and self.hard_limit and limit != self._limit_in_force:
            self._set_limit(self.device, limit)
            self._limit_in_force = limit

    def out_of_memory(self, size, limit):
        """PyTorch's allocator is about to raise out of memory: say what tierpack had set and planned, and what
        the allocator held (Note [Reserved memory]: what it could not give back)."""
        gib = float(1 << 30)
        state = self._memory_state(self.device) if self._memory_state is not None else None
        if state is not None:
            self.out_of_memory_state = dict(state, iteration=self.iteration, size=size, limit=limit)
            self.write_stats()  # the process may end with the error: the file says what happened
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
