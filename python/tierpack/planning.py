"""The storage mover's plan: asked of the placer through libtierpack_cuda.so's C ABI, followed call by call.

plan_with_library(lib) is the planner StorageMover is given: ``tierpack_plan_saved`` takes the recorded iteration
(Note [Recording]) and the options as JSON and returns the plan as JSON (placer/saved_plan.cpp, Note [Storage move
plan]). The Planning mixin of StorageMover (activations.py) asks for a plan under a limit on live bytes (the
budget's, or a lower one its replans chose: budget.py, reserved_memory.py; the costs the hooks measured:
measured_plans.py), logs it, and turns it into what each pack or unpack call does (plan_actions).
Owns: _planner, plan (the plan in force, a dict), plan_summary (the statistics' "plan"), _actions (per call),
_plan_events (the calls a planned iteration must match), _idle (nothing moves: the hooks step aside), _bandwidth,
_remade and _by_block (what the plan makes again: Note [Recipes], Note [Block recompute]). Sets _check_plan
(budget.py), _measure_remakes and _incumbent (measured_plans.py) and phase; writes the plan beside the statistics
(mover_stats.py).
"""

from __future__ import annotations

import json


class Planning:
    """StorageMover's plans (made from the trace, dropped at divergences)."""

    def _init_planning(self, planner):
        self._planner = planner
        self.plan = None              # the placer's plan (dict) in force
        self.plan_summary = None
        self._bandwidth = None
        self._both_ways = None  # both directions at once (Note [Streamed step] in placer/saved_plan.cpp)
        self._idle = False            # a plan with no moves: the hooks step aside
        self._remade = frozenset()     # storages the plan in force makes again (Note [Recipes])
        self._by_block = frozenset()   # ... of them, by running their block again (Note [Block recompute])

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
        given = limit
        for trace in self._traces_to_plan():
            natural = max(e["window_peak"] for e in trace["events"])
            limit = given
            if limit is None:
                limit = self.limit
                if natural <= self.budget * self.fits_fraction:
                    # The run fits its budget with a little to spare for the allocator's rounding: nothing has
                    # to move, whatever `fill` asks (GpuRuntimeOptions::fits_fraction). A replan's lower limit stays.
                    limit = max(limit, natural)
            limit = int(limit)
            options = {"limit_bytes": limit, "d2h_bytes_per_s": self._bandwidth[0],
                       "h2d_bytes_per_s": self._bandwidth[1], "min_bytes": self.min_bytes, "recompute": self.recompute}
            if self.stream_step:  # Note [Streamed step]: a chunk arriving, one updated, one leaving, its temporaries
                options["stream_window_bytes"] = 4 * self.step_chunk_bytes
                both = getattr(self.transport, "both_ways_bandwidth", None)
                if both is not None and self._both_ways is None:
                    try:  # (its copies share the link both ways at once)
                        self._both_ways = both()
                    except Exception as e:  # noqa: BLE001 - an input of the cost model: planned without it
                        self._both_ways = 0
                        self.log("storage mover: both-ways bandwidth not measured (%s): the streamed step is "
                                 "costed at each direction's own" % e)
                if self._both_ways:
                    options["both_ways_bytes_per_s"] = self._both_ways
            if self._host_costs is not None:  # Note [Host time]
                options["host_ms_per_copy"], options["host_ms_per_remake"] = self._host_costs
            try:
                plan = self._planner(trace, options)
            except Exception as e:  # noqa: BLE001 - training goes on, reactive
                self.log("storage mover: no plan (%s): moves stay reactive" % e)
                self.phase = "reactive"
                return
            # Note [Holds]: a plan from the trace less the holds stands if no call it makes again holds anything
            if trace is self._trace or not any(m.get("recompute") and m["storage"] in self._holding_members
                                               for m in plan["moves"]):
                break
        self._planned_trace = trace
        self.plan = plan
        self._freeze_objects()  # (done at the recorded iteration's end unless a plan came another way)
        self._write_saved(options)
        self._set_remade(plan)
        self._measure_remakes = bool(self._remade)
        self._actions = plan_actions(plan)
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

    def _traces_to_plan(self):
        """Note [Holds] (module_recompute.py): the trace less the module calls' holds first, where the recorded
        iteration had any, then the trace."""
        if self._holds:
            events = [dict(e, live=max(e["live"] - h, 0), window_peak=max(e["window_peak"] - h, 0))
                      for e, h in zip(self._trace["events"], self._holds)]
            yield dict(self._trace, events=events)
        yield self._trace

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

    def _drop_plan(self):
        self.plan = None
        self._incumbent = None
        self._set_remade(None)
        self._idle = False
        self.phase = "reactive"
        self._allocator_limit(None)  # reactive moves cannot promise the budget


def plan_actions(plan):
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
