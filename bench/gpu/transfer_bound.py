"""The least step time a runtime that only places tensors (GPU or host memory) can reach at a GPU budget.

Note [Transfer bound]
~~~~~~~~~~~~~~~~~~~~~
The issue's physical floor, max(default step, (default peak - budget) / bandwidth), asks only that the
bytes over the budget cross the link once each way somewhere in the step. It does not ask *when*. In a
training step they cannot cross at any time. Take any moment t of the forward or backward pass, with
live(t) the bytes of tensors alive then. The device holds at most the budget, so at least

    over(t) = live(t) + context - budget

bytes of tensors alive at t are not in device memory at t. Each such byte was written for the last
time before t, and no earlier than the previous optimizer step: activations, autocast's casts and
gradients are written in this iteration, parameters and optimizer state by the optimizer step.
Whether the runtime copied it out or a kernel wrote it straight into host memory, the byte crossed
the link device-to-host between its last write and t, so within the previous optimizer step plus this
iteration up to t, stretched by whatever the runtime made the GPU wait there. At the link's measured
device-to-host bandwidth B:

    step >= default step + max over t of max(0, over(t) / B - (optimizer + elapsed(t)))

where optimizer is the default run's GPU time of the optimizer step and elapsed(t) the GPU time from
the start of the forward pass to t (CUDA events; a runtime cannot run the default's kernels faster).

Measuring it (bench/gpu/gpt2_bench.py, default mode): events at the start, after every transformer
block's forward, at the loss, when each block's output gradient is ready in backward, and at the ends
of backward and of the optimizer step; their GPU times are medians over the timed steps. In probe steps
after them, PyTorch's peak of requested bytes (``requested_bytes.all.peak``, not its rounded blocks) is
read and reset at each event, so each interval's peak is known to lie before the event that closes it;
the bound takes that event's time as t (the latest the peak can be: the weakest choice). The default run
is the least that can be live: tensors PyTorch frees as soon as they are dead.

This is a bound, not an estimate. It leaves out the host-to-device direction (the same bytes must be
back before backward or the optimizer reads them, which only adds), every driver cost, and the
granularity of real pages and copies. It holds for runtimes that only choose where tensors live: every
tensor PyTorch keeps is kept, every kernel runs on the GPU in the script's order (tierpack's page groups,
``save_on_cpu``, parameter and optimizer-state offload that leaves the optimizer on the GPU). It does not
hold for recomputation (gradient checkpointing), compression, an optimizer run on the CPU (ZeRO-Offload's
CPU Adam writes the optimizer state on the host, so it never crosses the link) or an optimizer step moved
into backward (the state's last write moves earlier): those change what runs where or when.

Its use is to tell a runtime's shortfall from the workload's: ``floor / bound`` is the best fraction of
the floor's throughput any such runtime can reach at that budget, and for a mode measured at some peak
memory, ``step / bound(that peak)`` the most such a runtime at the same peak can beat it by.
"""


def transfer_bound(step_s, optimizer_s, points, context_bytes, budget_bytes, d2h_Bps):
    """(seconds, index): the least step time at `budget_bytes` for a runtime that only places tensors, and the point of
    `points` that sets it (None when no point is over the budget's window). `points`: (seconds since the forward pass
    began, bytes live at or before that moment) along forward and backward. Note [Transfer bound]."""
    for name, v in (("step_s", step_s), ("optimizer_s", optimizer_s), ("context_bytes", context_bytes),
                    ("budget_bytes", budget_bytes)):
        if v is None or v < 0:
            raise ValueError(f"transfer_bound: {name} must be a number >= 0, got {v!r}")
    if d2h_Bps is None or d2h_Bps <= 0:
        raise ValueError(f"transfer_bound: d2h_Bps must be > 0, got {d2h_Bps!r}")
    if not points:
        raise ValueError("transfer_bound: no points of the live-bytes curve")
    best, at = step_s, None
    for i, (t, live) in enumerate(points):
        if t is None or live is None or t < 0 or live < 0:
            raise ValueError(f"transfer_bound: point {i} must be (seconds >= 0, bytes >= 0), got {(t, live)!r}")
        if optimizer_s + t > step_s:
            raise ValueError(f"transfer_bound: point {i} ({t:.4f} s) and the optimizer ({optimizer_s:.4f} s) exceed the step ({step_s:.4f} s)")
        over = live + context_bytes - budget_bytes
        b = step_s + max(0.0, over / d2h_Bps - (optimizer_s + t))
        if b > best:
            best, at = b, i
    return best, at
