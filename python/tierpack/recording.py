"""The storage mover's recorded iteration: the trace (a SavedTrace, core/saved_trace.hpp) its plans are made from.

The Recording mixin of StorageMover (activations.py) samples every pack and unpack of the recorded iteration and
the GPU times of the timed ones after it (Note [Recording]), and turns them into the trace at the iteration's end.
Owns: record_iteration and timed_iterations (which iterations), _trace, _pressure_in_timing (whether the timed ones
move), _iteration_start and _host_start (the iteration's start on the GPU and on the host), _optimizer_start; per
iteration (_begin_recording): _recording, _timing, _events, _stalls (the compute stream's waits for copies), _seen
(per storage), _autocast_in_backward, _compiled_saves (what torch.compile's graphs saved: Note [Under torch.compile]).
Reads the records (_by_index), _absent, transport, device and the allocator's
counters; the module calls and blocks come from ModuleRecompute (module_recompute.py). A new trace clears the costs
measured on the one before (_calibrated, _trials_due, _incumbent, _host_costs: measured_plans.py).

Note [Recording]
~~~~~~~~~~~~~~~~
Three iterations make the trace. The recorded one samples the allocator at every call (its live bytes, and
its peak since the previous call); those reads cost host time, which on the H200 left the GPU waiting
and made GPT-2 large's recorded step ~8x its real length (bench/results/gpu-h200-2026-12-01, call 3). So
the next iterations (``timed_iterations``, 2 by default) only record a timing event and the host's clock at
every call, and move nothing when the recorded live peak fits the device; their GPU times replace the
recorded ones call by call when they made the same calls, each call's the least of them (and the step's). The
recorded iteration's live bytes at a call are the allocator's plus what the warm-up's reactive moves let go and is
not back, less what of that is still held (the program keeps a block's input until its residual add; a weak
reference per storage let go says so): the allocator counts those already (CPU-tested; HF GPT-2 large's recorded
peak above its peak without moves came from the module calls' holds instead, Note [Holds]). One
timed iteration, right after the recorded one, measured GPT-2 large's step at 305.5 ms where its planned steps,
making 20 GB again, took 258-284 ms, and the T5-style model's at 609 ms against a default step of 245 ms
(bench/results/gpu-h200-2026-12-03-1, call 4): the plans were predicted 25% slow. The plan is made at the last
one's end.

Note [Under torch.compile]
~~~~~~~~~~~~~~~~~~~~~~~~~~
A graph compiled by torch.compile saves its tensors through one autograd function (AOTAutograd's CompiledFunction),
so the hooks see them as they see any other, and copy them out and back as the plan says. They cannot make them
again: the graph's ops are not seen one by one (no recipe, no module call: the module hooks do nothing in traced code,
Note [Module recompute]), and the compiler has chosen already what its backward recomputes (its activation memory
budget). So under torch.compile tierpack offloads only, and the recorded iteration says how much of what was saved
came from compiled graphs (a pack called from torch._functorch's frames: looked up in the recorded iteration only).
A model compiled whole unpacks all of them when its one backward starts; tierpack breaks its graph per block so each
block's backward unpacks its own (Note [Compile per block] in compile_split.py).
"""

from __future__ import annotations

import os
import sys
from time import perf_counter as _clock

_FUNCTORCH = os.sep + "_functorch" + os.sep


def saved_by_compiled_graph(depth=12):
    """Whether the pack hook running now was called for a graph torch.compile made (Note [Under torch.compile])."""
    f = sys._getframe(1)
    while f is not None and depth > 0:
        if _FUNCTORCH in f.f_code.co_filename:
            return True
        f, depth = f.f_back, depth - 1
    return False


class Recording:
    """StorageMover's recorded and timed iterations (Note [Recording])."""

    def _init_recording(self, record_iteration, timed_iterations, capacity):
        self.record_iteration = max(1, int(record_iteration))
        self.timed_iterations = max(1, int(timed_iterations))  # Note [Recording]
        # Note [Recording]: the timing iteration moves nothing when the recorded live peak fits the device.
        self._pressure_in_timing = None if capacity is None else (
            lambda trace: max(e["window_peak"] for e in trace["events"]) > 0.9 * capacity(self.device))
        self._trace = None            # the recorded iteration (dict), kept for inspection and replans
        self._holds = None            # per call of the trace, the bytes module calls held (Note [Holds]), or None
        self._holding_members = frozenset()  # storages the calls that held anything make (Note [Holds])
        self._planned_trace = None    # the trace the plan in force was made from: _trace, or it less the holds
        self._iteration_start = None
        self._host_start = None        # the host's clock at the iteration's start (Note [Host time])
        self._optimizer_start = None

    def _begin_recording(self):
        """Whether the iteration starting now is the recorded one, a timed one, or neither."""
        self._autocast_in_backward = False
        self._recording = self.plan is None and self.iteration == self.record_iteration and self.device is not None
        self._timing = self.plan is None and self._trace is not None and \
            self.record_iteration < self.iteration <= self.record_iteration + self.timed_iterations
        self._events = [] if (self._recording or self._timing) else None
        self._stalls = []         # (call index, start event, end event) of compute waits, recorded iteration
        self._seen = []           # recorded iteration: {"bytes", "movable"} per storage index
        self._compiled_saves = [0, 0]  # recorded iteration: storages and bytes torch.compile's graphs saved
        self._recorded_held = []  # recorded iteration: (weak reference, bytes) let go, maybe still held (Note [Recording])

    def _sample(self, kind, rec, movable):
        if self._timing:
            self._events.append({"kind": kind, "storage": rec.index, "bytes": rec.nbytes, "mark": self.transport.mark(),
                                 "call": self._call - 1, "host": _clock()})
            return
        dev = self.device
        peak = self._max_allocated(dev)
        self._reset_peak(dev)
        live = self._allocated(dev)
        absent = self._absent - self._still_held()
        # Note [Holds]: what the calls hold now; the window up to the next call is counted less the same (a hold
        # that begins in it adds its bytes there: an input held from its call's end was live until then anyway)
        hold = self._modules.held_now() if self._modules.holding else 0
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
        self._events.append({"kind": kind, "storage": rec.index, "mark": self.transport.mark(), "live": live + absent,
                             "window_peak": live + absent, "absent": absent, "hold": hold, "call": self._call - 1})

    def _still_held(self):
        """Note [Recording]: the bytes let go in the recorded iteration that something still holds (the program, a
        copy in flight): on the device, so the allocator's live bytes count them already."""
        held = self._recorded_held
        if not held:
            return 0
        held[:] = [(ref, n) for ref, n in held if not ref.expired()]
        return sum(n for _, n in held)

    def _finish_trace(self, end):
        """The recorded iteration as a SavedTrace (core/saved_trace.hpp): live bytes plus what was away."""
        ev = self._events
        last = ev[-1]
        last["window_peak"] = max(last["window_peak"], self._max_allocated(self.device) + last["absent"])
        times = self._gpu_times(ev, end)
        events = [{"kind": e["kind"], "storage": e["storage"], "t_ms": t, "live": int(e["live"]),
                   "window_peak": int(max(e["window_peak"], e["live"]))} for e, t in zip(ev, times["t_ms"])]
        # Note [Holds]: per call, the bytes of the module calls' holds in that live count, and what those calls make
        self._holds = [int(e["hold"]) for e in ev] if any(e["hold"] for e in ev) else None
        self._holding_members = self._modules.holding_members() if self._holds else frozenset()
        self._modules.fill_trace(self._seen, self.transport.elapsed_ms)  # Note [Module recompute]
        blocks = self._modules.fill_blocks(self._seen, self.transport.elapsed_ms)  # Note [Block recompute]
        if self._modules.verdicts:
            self.log("storage mover: " + self._modules.summary())
        n, nbytes = self._compiled_saves
        if n:  # Note [Under torch.compile]
            self.log("storage mover: %d of %d saved storages (%.2f GiB) come from torch.compile's graphs: the plan may "
                     "copy them out and back, never make them again (the compiler chose what its backward recomputes)"
                     % (n, len(self._seen), nbytes / 2**30))
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

    def trace(self):
        """The recorded iteration (a SavedTrace as a dict), or None."""
        return self._trace
