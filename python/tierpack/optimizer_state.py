"""The optimizer's state moved by the storage mover like a saved storage, and the optimizer step streamed a chunk of
state at a time.

The OptimizerState mixin of StorageMover (activations.py): the optimizer-step hooks (tierpack.cuda registers them)
tell it the optimizer's parameters (never moved) and state tensors, which get records at the iteration's first call
and are packed there (Note [Optimizer state]); with ``stream_step`` the pre-step hook runs the step itself, a chunk at
a time (Note [Streamed step]). Owns: move_optimizer_state, stream_step, step_chunk_bytes, _parameters,
_state_tensors, _stepping (a streamed step under way), _away (state the last streamed step sent out), _state_hooked.
Reads and moves the state records (_states, made by the core per iteration) through the core's moves (_fetch,
_wait, _let_go, _copies_out); sets _optimizer_start (recording.py).

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

Note [Streamed step]
~~~~~~~~~~~~~~~~~~~~
The optimizer step reads parameters, gradients and all of its state at once (AdamW in fp32: 16 bytes a
parameter), so with the state fetched before it the step alone needs more than 60% of checkpointing's peak
on the bench's 680-778M-parameter models (bench/results/gpu-h200-2026-12-04-1). With ``stream_step`` the
pre-step hook updates the parameters itself, a chunk of ~``step_chunk_bytes`` of state at a time, by the
optimizer's own update function (the step without its hooks, ``type(opt).step.__wrapped__``) over the
param groups narrowed to the chunk; the last chunk is left in the narrowed groups for the optimizer's own
step, and the post-step hook restores the groups. Before a chunk's update its state let go by the plan is
fetched (the next chunk's is fetched meanwhile); after it, that state is copied out and let go once the
chunk after it is updated: a chunk arriving, one updated and one leaving, and the update's temporaries (a
chunk's worth: with three chunks counted the Llama-style decoder's plans passed their peak by 0.13 GiB after
the step's last call, bench/results/gpu-h200-2026-12-06-1, call 3), the window the plan counts
(placer/saved_plan.cpp, Note [Streamed step]). State the plan fetched in backward (what fits there to the
iteration's end) is found on the device and stays. The state the step sent out starts the next iteration away
(its copy is current: nothing changes it before the next step), so the plan's copy at its pack is already
done. Each element's update reads only its own parameter, gradient and state, so chunks give the same
bits as one step. ``optimizer.state_dict()`` brings the state home first (a state_dict pre-hook); other
code that reads the optimizer's state between steps would find it empty. A plan that moves nothing (idle: its hooks
step aside, so the iteration makes no state records) still streams the step, in chunks of the state tensors' own
sizes, since its peak was measured with the step streamed; state the last streamed step sent out comes home at the
pre-step hook when no first call of the iteration took it over. Off by default. Session 31's H200
runs streamed nothing: the pre-hook took the optimizer, the first of the step's arguments, for a closure,
so the state was fetched late, all at once (bench/results/gpu-h200-2026-12-05-1, call 4).
"""

from __future__ import annotations

import weakref
from time import perf_counter as _clock

from tierpack._storage import flat_bytes as _flat_bytes
from tierpack._storage import untyped as _untyped


class OptimizerState:
    """StorageMover's optimizer state moves and streamed step (Notes [Optimizer state], [Streamed step])."""

    def _init_optimizer_state(self, optimizer_state, stream_step, step_chunk_bytes):
        self.move_optimizer_state = optimizer_state
        # Note [Streamed step]: the optimizer step a chunk of state at a time (only with optimizer_state)
        self.stream_step = bool(stream_step) and bool(optimizer_state)
        self.step_chunk_bytes = max(1, int(step_chunk_bytes))
        self._stepping = None  # a streamed step between its pre- and post-hook: what to finish and restore
        self._away = {}        # id(state tensor) -> (host copy, its event, bytes): sent out by the last streamed step
        self._state_hooked = weakref.WeakSet()  # optimizers whose state_dict brings the state home first
        self._parameters = set()
        self._state_tensors = []      # the optimizer's state tensors on the device, in a stable order

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

    def _pack_states(self):
        """The iteration's first call: each state tensor gets a record and is packed (Note [Optimizer state]); one the
        last streamed step sent out starts the iteration away (Note [Streamed step])."""
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
            if self._away and not self._started:
                # State the last streamed step sent out is taken over at the iteration's first call (_pack_states);
                # an iteration without one (an idle plan's) brings it home here, before the step reads it.
                self.bring_state_home(optimizer)
            chunks = None if closure else self._step_chunks(optimizer)
            for rec in self._states:
                self._on_call("unpack", rec, False)
                if rec.released and chunks is None:
                    if rec.fetched is None:
                        self.counters.fetched_late += 1
                        self._fetch(rec)
                    self._wait(rec.h2d, self._events is not None)
            if chunks is not None:
                t0 = _clock()
                try:
                    self._stream_step(optimizer, chunks)
                finally:
                    self.counters.step_host_ms += (_clock() - t0) * 1e3

    def _step_chunks(self, optimizer):
        """The streamed step's chunks [(group index, parameter, its state records)], or None: no streaming. An
        iteration with no state records (an idle plan's: its hooks step aside before the iteration's first call
        makes them) streams too, with nothing to fetch or send out: its plan's peak was measured with the step
        streamed (the Llama-style decoder's idle plan at 60% of compile's peak ran out of memory in one AdamW
        step's temporaries under limit:hard: bench/results/gpu-h200-2026-12-14-1, call 8)."""
        if not self.stream_step or optimizer is None or not self._state_tensors or self._stepping is not None or \
                (not self._states and not self._idle) or getattr(type(optimizer).step, "__wrapped__", None) is None:
            return None  # (no records and no idle plan: a mover with no budget, or before its first call)
        rec_of = {id(r.tensor): r for r in self._states}
        # (a tensor's own size: a state let go has a storage of 0 bytes)
        size_of = {id(v): v.numel() * v.element_size() for v in self._state_tensors}
        chunks, cur, size = [], [], 0
        for gi, g in enumerate(optimizer.param_groups):
            for p in g["params"]:
                states = [v for v in (optimizer.state.get(p) or {}).values() if id(v) in size_of]
                cur.append((gi, p, [rec_of[id(v)] for v in states if id(v) in rec_of]))
                size += sum(size_of[id(v)] for v in states)
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

        def fetch(chunk):  # one batch a chunk (Note [Batched moves])
            self._fetch_many([r for _, _, rs in chunk for r in rs])

        self._stepping = (opt, saved, pending, away, chunks[-1])
        try:
            fetch(chunks[0])
            for k, chunk in enumerate(chunks):
                if k + 1 < len(chunks):
                    fetch(chunks[k + 1])
                waited = set()  # a batch's copies share one event: wait for it once
                for _, _, rs in chunk:
                    for r in rs:
                        if r.released and r.fetched is not None and id(r.h2d) not in waited:
                            waited.add(id(r.h2d))
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
        t0 = _clock()
        opt, saved, pending, away, last = self._stepping
        self._stepping = None
        for g, ps in zip(opt.param_groups, saved):
            g["params"] = ps
        self._send_out(last, away, pending)
        while pending:
            self._let_out(*pending.pop(0))
        self.counters.step_host_ms += (_clock() - t0) * 1e3

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
