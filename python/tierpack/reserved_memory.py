"""What PyTorch's allocator holds against the storage mover's budget: its reserved memory, not its live bytes.

The ReservedMemory mixin of StorageMover (activations.py): under the soft limit a planned iteration whose reserved
peak passes the budget plans again lower, and a limit lowered too far rises again (Note [Reserved memory]); under
limit:hard the allocator keeps under the budget itself (budget.py, Note [Budget]), and where it has to give its cache
back to do so a lower limit is tried (Note [Allocator retries]). Owns: _max_reserved (the allocator's reserved peak),
reserved_replans_left, room_replans_left, _reserved_warned, _alloc_retries and _retries_seen (the allocator's retry
count), retry_replans_left, _retry_plan. Reads plan, plan_summary, budget, limit and counters; plans again through
_make_plan (planning.py), or puts a plan on trial (measured_plans.py).

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
  the first planned iterations see the layouts of the plans before them. It never rises to within half of
  ``ROOM_FRACTION`` of the budget of the lowest limit under which the allocator was seen over the budget (``_over_at``)
  on one iteration's room, nor by less than a quarter of it: only room seen in two planned iterations in a row (no
  excess between) lifts that cap. How much the allocator holds beyond live bytes changes from one layout to the
  next, and a limit that rose past one found over went over again. On
  Hugging Face's GPT-2 large at 75% of its default peak (an H100), a limit lowered from 27.71 to 26.84 GiB for
  0.1 GiB over rose to 27.89 GiB one iteration later, and the plans made and made again put the timed steps at
  466-578 ms where the settled plans ran 323-338 ms (bench/results/gpu-h200-2026-12-12-1, call 1).
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

Note [Allocator retries]
~~~~~~~~~~~~~~~~~~~~~~~~
Under ``limit:hard`` an allocation that finds no free block it fits and no room under the limit to map more
makes PyTorch's allocator give back its cached blocks and try again (its ``num_alloc_retries``). Giving pages back
waits for the device: the host stops until the GPU has run what was queued, and the GPU then waits for the host
to queue work again. On HF GPT-2 large under checkpointing at 60% of its peak (an H100) the 1.6 GB of fp32
log-probabilities at the loss did so in the profiled step: 27.4 ms of host time in ``aten::_log_softmax``, 11.8 ms
of it in ``cudaStreamSynchronize``, then the compute stream idle 15.4 + 8.4 + 3.2 ms; PyTorch counted 15 retries
and 19 synchronisations of all streams in the run, none under checkpointing alone (bench/results/gpu-h200-2026-12-14-1,
call 11). The cost model does not see it: the step ran 421 ms where the plan predicted 352. So each iteration
counts the allocator's retries (the statistics' ``alloc_retries``), and under ``limit:hard`` a planned iteration
that counts for its plan (after the plan's first, matching the recorded one, no new pinned memory: Note [Measured
plans]) and had any puts a plan under a limit on live bytes lower by ``RETRY_CUT`` of the budget on trial against
the plan in force: the lower plan moves more bytes, and leaves the allocator more room. Measured longer (by more
than the trial's margin), the plan in force comes back and no retry is tried again; kept, and still retrying, a
further cut is tried, at most ``retry_replans`` (2) in all. The log says ``storage mover: iteration N: PyTorch's
allocator gave its cache back and retried K time(s) under the budget's limit ...``.
"""

from __future__ import annotations


class ReservedMemory:
    """StorageMover's replans for the memory the allocator holds (Note [Reserved memory])."""

    # Room under the budget (a fraction of it) in what the allocator holds that raises a lowered limit (Note [Reserved
    # memory]): less is the allocator's rounding from one iteration to the next
    ROOM_FRACTION = 0.05

    # Note [Allocator retries]: how much lower (a fraction of the budget) the limit on live bytes of a plan tried for
    # the allocator's retries is
    RETRY_CUT = 0.05
    RETRY_WHY = "the allocator's retries"

    def _init_reserved_memory(self, max_reserved, reserved_replans, room_replans, alloc_retries=None, retry_replans=2):
        self._alloc_retries = alloc_retries
        self._retries_seen = None  # the allocator's retries at the last iteration's end
        self.retry_replans_left = int(retry_replans)
        self._retry_plan = None  # the plan summary whose retries were last tried for (one trial per plan)
        self._max_reserved = max_reserved
        self.reserved_replans_left = int(reserved_replans)
        self.room_replans_left = int(room_replans)
        self._over_at = None  # the lowest limit on live bytes whose plan held over the budget (Note [Reserved memory])
        self._room_streak = 0  # planned iterations in a row with room under the budget since the last rise or excess

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
        self._over_at = min(self._over_at or self.plan["limit_bytes"], self.plan["limit_bytes"])
        self._room_streak = 0
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
        if room < self.budget * self.ROOM_FRACTION:
            self._room_streak = 0
            return
        if self.room_replans_left <= 0 or limit >= self.limit or self.plan_summary is None or \
                self.iteration <= self.plan_summary["iteration"] + 1:
            return
        self._room_streak += 1
        raised = min(self.limit, limit + room // 2)
        if self._over_at is not None and self._room_streak < 2:
            # one iteration's room takes the limit neither back to one found over nor up for a small gain
            raised = min(raised, self._over_at - int(self.budget * self.ROOM_FRACTION / 2))
            if raised - limit < self.budget * self.ROOM_FRACTION / 4:
                return
        self._room_streak = 0
        self.room_replans_left -= 1
        gib = float(1 << 30)
        self.log("storage mover: PyTorch's allocator held %.2f GiB, %.2f GiB under the %.2f GiB budget: planning again "
                 "under %.2f GiB of live bytes (was %.2f)" % (self.counters.peak_reserved / gib, room / gib,
                                                              self.budget / gib, raised / gib, limit / gib))
        kept = (self.plan, self._actions, self._idle, self.plan_summary)
        self._make_plan(raised)
        if self.plan is None or not self.plan["fits"]:  # (cannot be: a higher limit fits what a lower one did)
            self.plan, self._actions, self._idle, self.plan_summary = kept
            self._set_remade(self.plan)

    def _count_retries(self):
        """Note [Allocator retries]: the allocator's retries in this iteration, into its counters."""
        if self._alloc_retries is None:
            return
        now = int(self._alloc_retries(self.device))
        self.counters.alloc_retries = now - self._retries_seen if self._retries_seen is not None else 0
        self._retries_seen = now

    def _check_retries(self, counted):
        """Note [Allocator retries]: a counted planned iteration under limit:hard whose allocator retried puts a plan
        under a limit lower by RETRY_CUT of the budget on trial (measured_plans.py), once per plan."""
        n = self.counters.alloc_retries
        if not n or counted is not self.plan_summary or not self.hard_limit or \
                self._limit_in_force is None or not self.plan["fits"] or self.retry_replans_left <= 0 or \
                self._retry_plan is self.plan_summary or self._incumbent is not None:
            return
        cut = int(self.budget * self.RETRY_CUT)
        if self.plan["limit_bytes"] - cut <= 0:
            return
        self._retry_plan = self.plan_summary
        self.retry_replans_left -= 1
        self._trials_due.append((self.RETRY_WHY, lambda: cut, self._stop_retry_replans))
        gib = float(1 << 30)
        self.log("storage mover: iteration %d: PyTorch's allocator gave its cache back and retried %d time(s) under "
                 "the budget's limit (limit:hard: each waits for the device): a plan under %.2f GiB of live bytes "
                 "(was %.2f) goes on trial (Note [Allocator retries])"
                 % (self.iteration, n, (self.plan["limit_bytes"] - cut) / gib, self.plan["limit_bytes"] / gib))

    def _stop_retry_replans(self):
        """Note [Allocator retries]: a lower limit that ran longer is not tried again."""
        self.retry_replans_left = 0
