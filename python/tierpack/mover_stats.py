"""The storage mover's statistics: each iteration's counters, the history of them, and the files `tierpack run` reads.

Counters is one iteration's (its keys are the statistics' names: docs/formats.md). The MoverStats mixin of
StorageMover (activations.py) owns stats_out, history and _saved_options (the options of the plan in force), writes
<stats>.gpu<N>.json (the GPU statistics file, core/gpu_stats.hpp) and <stats>.gpu<N>.saved.json (the recorded
iteration and its plan: what `tierpack gpu-replay` plans again), and reads what the other parts keep for them: the
plan (planning.py), over_planned, held and out_of_memory_state (budget.py), trials and recomputations
(measured_plans.py).

Note [Statistics file]
~~~~~~~~~~~~~~~~~~~~~~
<stats>.gpu<N>.json holds every iteration of the history (up to 200) and the plan's measured recomputations, so
writing it costs the host more as a run goes on: with 200 iterations a write took 5.0 ms (median of 20, Debian's
CPU), and rewriting it at every iteration's end put that into every step of a long run (`tierpack run` always sets
stats_out). So the file is rewritten at an iteration's end only when a second has passed since the last time
(``stats_every_s``), or when the phase or the plan in force changed; also at an out-of-memory error (budget.py), at
the process's normal exit (atexit: what `tierpack run` reads afterwards is the whole run) and whenever
write_stats() is called. A process killed by a signal leaves the file as it was at most a second (and one plan)
before. The recorded iteration's <stats>.gpu<N>.saved.json is written once per plan, as before.
"""

from __future__ import annotations

import atexit
import json
import time
import weakref


class Counters:
    """One iteration's counters, by the names the statistics give them."""

    FIELDS = ("saved_storages", "saved_bytes", "bytes_out", "bytes_in", "released", "fetched_late", "divergences",
              "peak_live", "peak_reserved", "calls", "host_ms", "recomputed", "bytes_recomputed", "gc_ms", "gc_full",
              "pinned_new",
              # Note [Host time]: the planned actions' host time, per copy issued and per recomputation or block run
              "move_host_ms", "copies_issued", "remake_host_ms", "remakes", "block_host_ms", "block_runs",
              # Note [Streamed step]: chunks a streamed step updated before the optimizer's own step, and the host
              # time of its fetches, updates and copies out (the optimizer's own step of the last chunk left out)
              "step_chunks", "step_host_ms",
              # Note [Allocator retries]: allocations that found no room under the allocator's limit, which gave its
              # cache back (synchronising the device) and tried again
              "alloc_retries")

    def __init__(self):
        for f in self.FIELDS:
            setattr(self, f, 0)

    def as_dict(self):
        return {f: getattr(self, f) for f in self.FIELDS}


class MoverStats:
    """StorageMover's statistics and the files beside `tierpack run --stats`."""

    def _init_stats(self, stats_out, every_s=1.0):
        self.stats_out = stats_out or ""
        self.stats_every_s = float(every_s)  # Note [Statistics file]
        self._stats_written = None   # (time, phase, plan summary, last history entry) of the last write
        self._stats_at_exit = False
        self.history = []             # per-iteration {"iteration", "mode", counters...}
        self._saved_options = None     # the options of the plan in force (its .saved.json)

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
               # (the trace the plan was made from: less the module calls' holds, Note [Holds], where it could be)
               "trace": {k: v for k, v in (self._planned_trace or self._trace).items()
                         if k in ("storages", "events", "blocks", "step_ms", "optimizer_ms", "context_bytes")},
               "options": options, "plan": self.plan}
        if measured is not None:
            doc["recomputations"] = measured  # Note [Measured recomputation]
        self._write_json(self._stats_path(".saved.json"), doc)

    def _stats_due(self):
        """At an iteration's end: the statistics file is rewritten if it is due (Note [Statistics file])."""
        last = self._stats_written
        if last is None or time.perf_counter() - last[0] >= self.stats_every_s or last[1] != self.phase or \
                last[2] is not self.plan_summary:
            self.write_stats()

    def write_stats(self):
        """Rewrites <stats>.gpu<N>.json now (nothing without stats_out, or before the device is known)."""
        if not self.stats_out or self.device is None:
            return
        if not self._stats_at_exit:
            self._stats_at_exit = True
            atexit.register(_write_at_exit, weakref.ref(self))
        self._write_stats()
        self._stats_written = (time.perf_counter(), self.phase, self.plan_summary,
                               self.history[-1] if self.history else None)

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
                               "step_chunks": h["step_chunks"], "step_host_ms": h["step_host_ms"],
                               "alloc_retries": h["alloc_retries"],
                               "step_ms": h.get("step_ms"),
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


def _write_at_exit(ref):
    """Note [Statistics file]: what the last write left out, at the process's exit."""
    mover = ref()
    if mover is not None and mover._stats_written is not None and \
            mover._stats_written[3] is not (mover.history[-1] if mover.history else None):
        mover.write_stats()
