"""Costs the storage mover's hooks measure, and the plans made with them, on trial against the plans they replace.

The MeasuredPlans mixin of StorageMover (activations.py): every iteration's GPU span (its step), the hooks' host time
per copy and per recomputation (Note [Host time] in placer/saved_plan.cpp), the GPU time of each storage made again
(Note [Measured recomputation]); a plan made for such a cost is on trial (Note [Measured plans]). Owns: host_time,
_host_costs (planned with) and _host_measured, _trials_due, _span, _incumbent, trials, _measure_remakes, _remaking,
_pending_remakes, recomputations, _calibrated; per iteration (_begin_remake_timing): _remake_marks (the core's _remake
adds to it). Reads plan, plan_summary, the trace, counters and transport; plans through _make_plan (planning.py) and
puts a plan that lost its trial back (plan, _actions, _idle, plan_summary: planning.py).

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
"""

from __future__ import annotations

import statistics


class MeasuredPlans:
    """StorageMover's measured costs and plans on trial (Notes [Measured plans], [Measured recomputation])."""

    # Note [Measured plans]: a plan made for a cost the hooks measured runs this many measured iterations before it is
    # compared with the plan it replaced, and is given up when its median step is longer than that plan's by more than
    # TRIAL_MARGIN of it
    TRIAL_STEPS = 2
    TRIAL_MARGIN = 0.03
    # ... and up to this many while the two medians differ by less than either plan's steps spread (max - min)
    TRIAL_MAX_STEPS = 4

    def _init_measured_plans(self, host_time):
        self.host_time = bool(host_time)  # plan with the hooks' host time (Note [Host time] in placer/saved_plan.cpp)
        self._host_costs = None        # (ms per copy issued, ms per recomputation), planned with
        self._host_measured = None     # ... as measured, once per trace (Note [Host time])
        self._trials_due = []          # Note [Measured plans]: (why, apply(), undo()) of costs waiting for a trial
        # Note [Measured plans]: the GPU span of the last iteration (its summary when it counts for its plan, its
        # history entry, the marks at its start and end), read at the next iteration's end; the plan a cost replan
        # replaced, while its successor is on trial; the trials decided so far
        self._span = None
        self._incumbent = None
        self.trials = []
        self._measure_remakes = False  # Note [Measured recomputation]
        self._pending_remakes = None
        self._remaking = False         # a timed recomputation runs now (Note [Measured recomputation])
        self.recomputations = None     # the last measured: {"iteration", "predicted_ms", "measured_ms", "storages"}
        self._calibrated = False

    def _begin_remake_timing(self):
        # Note [Measured recomputation]: the first planned iteration of each plan times what it makes again.
        self._remake_marks = [] if self._measure_remakes and self.plan is not None else None
        self._measure_remakes = False

    def _queue_remake_times(self, entry):
        """Note [Measured recomputation]: what this iteration made again, with the plan's predictions, for
        _read_remake_times at the next iteration's end."""
        if not self._remake_marks:
            return
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
        self._pending_remakes = (entry, self._remake_marks, predicted, self.plan_summary)

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
        cut = sum(apply() or 0 for _, apply, _ in due)  # (bytes off the limit: Note [Allocator retries])
        self.log("storage mover: planning again with %s, on trial against the plan from iteration %d (Note [Measured "
                 "plans])" % (" and ".join(w for w, _, _ in due), self.plan_summary["iteration"]))
        self._make_plan(self.plan["limit_bytes"] - cut, trial=(" and ".join(w for w, _, _ in due), [u for _, _, u in due]))

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
