"""Python's collector and the storage mover: each collection counted in the iteration it lands in, and what is alive
at the first plan frozen out of later collections (Note [Python's collector]).

The PythonCollector mixin of StorageMover (activations.py). Owns: gc_freeze, _frozen; and, for every mover, the one
gc.callbacks entry (_gc_timer, with _gc_movers and _gc_start), which adds to the mover's counters (gc_ms, gc_full).

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

"""

from __future__ import annotations

import gc
import weakref
from time import perf_counter as _clock

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


class PythonCollector:
    """StorageMover's part in Python's collections (Note [Python's collector])."""

    def _init_collector(self, gc_freeze):
        self.gc_freeze = gc_freeze  # Note [Python's collector]
        self._frozen = False

    def _count_collections(self):
        """Each collection from now on counts in this mover's iterations (gc_ms, gc_full)."""
        _gc_movers.add(self)
        if _gc_timer not in gc.callbacks:
            gc.callbacks.append(_gc_timer)

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
