"""tierpack's GPU tier: installs the storage mover (default) or makes tierpack PyTorch's CUDA allocator.

``install()`` must run before the first CUDA allocation of the process (the sitecustomize bootstrap of
``tierpack run`` calls ``install_from_env()``). The setting ``gpu_mechanism`` (TIERPACK_GPU's ``mechanism``)
chooses how tensors leave the device (docs/config.md, docs/architecture.md):

* ``storage`` (default): PyTorch's caching allocator stays, with ``expandable_segments``; saved activations
  move as whole storages through autograd's saved-tensor hooks, in stream order, at the points the
  placer's plan names (tierpack/activations.py, Note [Storage moves]); the budget is the allocator's
  memory limit, so out of memory is PyTorch's own ``torch.OutOfMemoryError`` and its statistics are
  PyTorch's;
* ``vmm``: ``libtierpack_cuda.so`` becomes PyTorch's CUDA allocator through
  ``torch.cuda.memory.CUDAPluggableAllocator``: every CUDA tensor lives in always-mapped page groups under
  the budget, chunks over it spill to host memory, an iteration is traced through a TorchDispatchMode and
  page groups are remapped between device and host behind gates from the next one on;
  ``torch.cuda.memory_allocated()`` and friends report tierpack's numbers. Out of memory raises
  ``torch.OutOfMemoryError`` when ``libtierpack_cuda_torch.so`` built against this torch sits next to
  ``libtierpack_cuda.so`` (or is named by $TIERPACK_CUDA_TORCH_LIB); without it a RuntimeError with the
  same message (``oom_error_class()`` tells which). Returning NULL instead, as pluggable allocators may,
  makes PyTorch 2.11 fault with an illegal address.

Iteration boundaries come from the optimizer-step hooks (or ``tierpack.cuda.step()``).
"""

from __future__ import annotations

import ctypes
import json
import os
import sys
import threading

from tierpack import _native

_lib = None
_lib_path = None
_observer = None
_offloader = None
_installed = False
_observe = True
_lock = threading.Lock()


library_path = _native.cuda_library_path  # where libtierpack_cuda.so is


def _load(path: str):
    global _lib, _lib_path
    if _lib is None:
        _lib, _lib_path = _native.cuda_library(path), path
    return _lib


_oom_class = "RuntimeError"


def oom_error_class() -> str:
    """What an exhausted budget raises in this process: "torch.OutOfMemoryError" or "RuntimeError"."""
    return _oom_class


def last_error() -> str:
    return _lib.tierpack_gpu_last_error().decode() if _lib else ""


def install(budget=None, gpu: str | None = None, conf: str | None = None, path: str | None = None,
            observe_ops: bool = True, patch_stats: bool = True) -> None:
    """Make tierpack the CUDA allocator of this process.

    budget: bytes (int) or a string such as "24G" / "60%" (TIERPACK_CONF's gpu_budget);
    gpu: TIERPACK_GPU options, the alias of TIERPACK_CONF's gpu_* keys ("chunk:32M,spill:on,..."); conf: a whole
    TIERPACK_CONF text (default: $TIERPACK_CONF; gpu: $TIERPACK_GPU).
    Raises RuntimeError when PyTorch's CUDA allocator is already in use (install() came too late).
    """
    global _installed, _observe, _oom_class
    import torch

    with _lock:
        if _installed:
            return
        path = path or library_path()
        lib = _load(path)
        parts = [conf] if conf else ([os.environ["TIERPACK_CONF"]] if os.environ.get("TIERPACK_CONF") else [])
        if budget is not None:
            parts.append("gpu_budget:" + (str(int(budget)) + "B" if isinstance(budget, (int, float)) else str(budget)))
        conf_text = ",".join(p for p in parts if p)
        gpu_text = gpu if gpu is not None else os.environ.get("TIERPACK_GPU")
        rc = lib.tierpack_gpu_configure(conf_text.encode(), gpu_text.encode() if gpu_text is not None else None)
        if rc != 0:
            raise ValueError(last_error())
        options = settings()
        if options["gpu_mechanism"] == "storage":
            _install_storage_mover(torch, lib, options)
            _installed = True
            _observe = False
            _oom_class = "torch.OutOfMemoryError"
            return
        shim, why = _native.cuda_torch_shim(path)
        if shim:
            alloc = torch.cuda.memory.CUDAPluggableAllocator(shim, "tierpack_cuda_torch_malloc", "tierpack_cuda_torch_free")
        else:
            sys.stderr.write("tierpack: out of memory will raise RuntimeError, not torch.OutOfMemoryError: " + why + "\n")
            alloc = torch.cuda.memory.CUDAPluggableAllocator(path, "tierpack_cuda_malloc", "tierpack_cuda_free")
        _forward_record_stream(alloc, lib)
        try:
            torch.cuda.memory.change_current_allocator(alloc)
        except RuntimeError as e:
            raise RuntimeError(
                "tierpack: could not become PyTorch's CUDA allocator: CUDA memory was already allocated in this "
                "process before tierpack.cuda.install() ran (" + str(e) + ")") from e
        from torch.optim.optimizer import register_optimizer_step_post_hook

        register_optimizer_step_post_hook(lambda opt, *a, **k: step(opt))
        if patch_stats:
            _patch_stats(torch, lib)
        _installed = True
        _observe = observe_ops
        _oom_class = "torch.OutOfMemoryError" if shim else "RuntimeError"


def _forward_record_stream(alloc, lib) -> bool:
    """Makes ``Tensor.record_stream`` reach tierpack (PyTorch's pluggable allocator ignores it unless told
    where to send it): the block's free then waits for that stream's work, and the stream joins the ones the
    page-group mover holds at its remap gates (Note [Remap gate]). DDP's NCCL streams and a script's own
    copy streams announce themselves this way. Says so on stderr when this PyTorch cannot forward it."""
    native = alloc.allocator() if hasattr(alloc, "allocator") else None
    setter = getattr(native, "set_record_stream_fn", None)
    if setter is None:
        sys.stderr.write("tierpack: this PyTorch does not pass record_stream to a pluggable allocator: a tensor used "
                         "on a stream that did not allocate it must not be freed before that stream's work is done\n")
        return False
    setter(ctypes.cast(lib.tierpack_cuda_record_stream, ctypes.c_void_p).value)
    return True


def install_from_env() -> bool:
    """For the sitecustomize bootstrap: installs when the settings (TIERPACK_CONF, and its alias TIERPACK_GPU) say
    mode:run with a gpu_budget (or TIERPACK_GPU is set) and CUDA is available. Returns whether it installed; says why
    not. Raises ValueError on a bad setting (the bootstrap stops the program: docs/config.md)."""
    try:
        lib = _load(library_path())
    except OSError:
        return False  # a build without the GPU tier (no libtierpack_cuda.so): nothing to install
    if lib.tierpack_gpu_configure(None, None) != 0:
        raise ValueError(last_error())
    given = settings()
    if not ((given["mode"] == "run" and given["gpu_budget"] is not None) or os.environ.get("TIERPACK_GPU")):
        return False
    try:
        import torch
        if not torch.cuda.is_available():
            print("tierpack: no CUDA device: the GPU tier is not installed", file=sys.stderr)
            return False
        install()
        return True
    except ValueError:
        raise  # a bad TIERPACK_CONF / TIERPACK_GPU: the bootstrap stops the program (docs/config.md)
    except Exception as e:  # anything else must not stop the user's script
        print(f"tierpack: GPU tier NOT installed: {e}", file=sys.stderr)
        return False


def settings() -> dict:
    """The settings as libtierpack_cuda.so parsed them (TIERPACK_CONF and its alias TIERPACK_GPU, or what install()
    gave it), read by name: every key of docs/config.md by its TIERPACK_CONF name, with gpu_fill and gpu_headroom as
    the runtime uses them and gpu_fits_fraction (include/tierpack.h, tierpack_settings_json)."""
    out = _lib.tierpack_settings_json()
    if out is None:
        raise ValueError(last_error())
    return json.loads(out.decode())


# Note [Autocast's cache]
# ~~~~~~~~~~~~~~~~~~~~~~~
# autocast keeps a cache of its casts of parameters until its region exits, so none of them can leave the device in
# forward (Note [Recipes] in tierpack/recipes.py: 1.2-1.4 GiB on GPT-2 large); without the cache each cast is a
# saved storage like any other, which the plan may let go and make again from its parameter, bit for bit, and each
# use of a parameter casts it anew. That costs memory where nothing has to move: Hugging Face GPT-2 large's live
# peak was 47.18 GiB without the cache against 44.44 with it, so at 100% of its default peak the plan had to make
# 3.2 GiB again and ran 255.1 ms a step against the default's 221.6 (bench/results/gpu-h200-2026-12-10-1, call 3).
# So by default (gpu_autocast_cache:auto) the warm-up runs with the program's cache, and at the end of the
# iteration before the recorded one the mover turns it off only if that iteration's live peak passes the share of
# the budget under which nothing moves (fits_fraction; a budget given as a fraction of the recorded peak: always):
# StorageMover.autocast_cache_off. `off` turns it off at install, `on` leaves it as the program set it.
def autocast_cache(torch, keep, log) -> None:
    """Turns autocast's cache off (``keep`` False) for the regions entered from now on without their own
    ``cache_enabled`` (Note [Autocast's cache])."""
    if keep:
        return
    setter = getattr(torch, "set_autocast_cache_enabled", None)
    if setter is None:
        log("storage mover: this torch cannot turn autocast's cache off (no torch.set_autocast_cache_enabled): "
            "autocast_cache:off has no effect")
        return
    setter(False)
    log("storage mover: autocast keeps no cache of its casts of parameters from now on (gpu_autocast_cache): "
        "each cast is a saved storage the plan may let go in forward")


def _install_storage_mover(torch, lib, options):
    """mechanism:storage (Note [Storage moves] in tierpack/activations.py). `options`: settings(), by name."""
    global _offloader
    budget = options["gpu_budget"] or {}
    from tierpack.activations import StorageMover
    from tierpack.copy_streams import CudaTransport
    from tierpack.planning import plan_with_library

    # Note [Budget]: reserved bytes stay close to live bytes. Read when the allocator first runs, so it
    # applies when install() comes before the first CUDA allocation, as it must; a user's setting stays.
    if "expandable_segments" not in os.environ.get("PYTORCH_CUDA_ALLOC_CONF", ""):
        conf = os.environ.get("PYTORCH_CUDA_ALLOC_CONF", "")
        os.environ["PYTORCH_CUDA_ALLOC_CONF"] = (conf + "," if conf else "") + "expandable_segments:True"

    def set_limit(device, budget):
        total = torch.cuda.get_device_properties(device).total_memory
        torch.cuda.set_per_process_memory_fraction(min(1.0, budget / total) if budget else 1.0, device)

    def index(device):
        return device.index if device.index is not None else torch.cuda.current_device()

    # The allocator's counters read straight from its C++ statistics: torch.cuda.memory_allocated() builds
    # every statistic in Python first (Note [Recording]).
    stats = getattr(torch._C, "_cuda_memoryStats", None)
    reset = getattr(torch._C, "_cuda_resetPeakMemoryStats", None)
    if stats is not None and reset is not None:
        allocated = lambda d: stats(index(d))["allocated_bytes"]["all"]["current"]  # noqa: E731
        max_allocated = lambda d: stats(index(d))["allocated_bytes"]["all"]["peak"]  # noqa: E731
        reset_peak = lambda d: reset(index(d))  # noqa: E731
        max_reserved = lambda d: stats(index(d))["reserved_bytes"]["all"]["peak"]  # noqa: E731
        alloc_retries = lambda d: stats(index(d))["num_alloc_retries"]  # noqa: E731
    else:
        allocated, max_allocated = torch.cuda.memory_allocated, torch.cuda.max_memory_allocated
        max_reserved = torch.cuda.max_memory_reserved
        alloc_retries = lambda d: torch.cuda.memory_stats(d).get("num_alloc_retries", 0)  # noqa: E731
        reset_peak = torch.cuda.reset_peak_memory_stats

    def memory_state(device):
        """At an out-of-memory error (the allocator's lock is free then): what it holds, what is live, and the
        free blocks inside its mapped memory (Note [Reserved memory] in tierpack/reserved_memory.py)."""
        i = index(device)
        st = torch.cuda.memory_stats(i)
        gaps = []
        try:
            for seg in torch.cuda.memory._snapshot()["segments"]:
                if seg.get("device") == i:
                    gaps += [b["size"] for b in seg.get("blocks", ()) if b.get("state") == "inactive"]
        except Exception:  # noqa: BLE001 - the counters alone still say what was held
            pass
        return {"reserved": st.get("reserved_bytes.all.current", 0), "allocated": st.get("allocated_bytes.all.current", 0),
                "free_mapped": st.get("reserved_bytes.all.current", 0) - st.get("allocated_bytes.all.current", 0),
                "gaps": len(gaps), "largest_gap": max(gaps, default=0),
                "gaps_over_20m": sum(1 for g in gaps if g >= 20 << 20),
                "segments": st.get("segment.all.current", 0)}

    _offloader = StorageMover(
        # Note [Raw copies] (copy_streams.py): copies:raw, the default, issues each batch through the library
        torch, lambda device: CudaTransport(torch, device, lib if options["gpu_copies"] == "raw" else None),
        plan_with_library(lib),
        budget_bytes=budget.get("bytes"), budget_fraction=budget.get("fraction"),
        allocated=allocated, max_allocated=max_allocated, reset_peak=reset_peak, set_limit=set_limit,
        max_reserved=max_reserved, alloc_retries=alloc_retries,
        capacity=lambda d: torch.cuda.get_device_properties(d).total_memory, fill=options["gpu_fill"],
        fits_fraction=options["gpu_fits_fraction"],
        record_iteration=max(3, int(options["warmup_iterations"]) + 2), divergences=options["gpu_divergences"],
        empty_cache=torch.cuda.empty_cache, optimizer_state=True,
        hard_limit=options["gpu_limit"] == "hard", recompute=options["gpu_recompute"],
        gc_freeze=options["gpu_gc"] == "freeze", stream_step=options["gpu_step"] == "stream",
        stats_out=options["stats_out"], memory_state=memory_state)
    _offloader.install()
    from tierpack.compile_split import CompileSplit  # Note [Compile per block]

    CompileSplit(torch, _offloader.log, split=options["gpu_compile"] == "blocks",
                 on_compile=_offloader.shield_from_compiler).install()
    if options["gpu_autocast_cache"] == "auto":  # Note [Autocast's cache]
        _offloader.autocast_cache_off = lambda: autocast_cache(torch, False, _offloader.log)
    else:
        autocast_cache(torch, options["gpu_autocast_cache"] == "on", _offloader.log)
    observe = getattr(torch._C, "_cuda_attach_out_of_memory_observer", None)
    if observe is not None:  # says why, before PyTorch raises
        observe(lambda device, size, limit, free: _offloader.out_of_memory(size, limit))
    from torch.optim.optimizer import register_optimizer_step_post_hook, register_optimizer_step_pre_hook

    register_optimizer_step_pre_hook(_offloader.optimizer_pre_hook)
    register_optimizer_step_post_hook(lambda opt, *a, **k: step(opt))


def activation_stats() -> dict:
    """mechanism:storage: the plan (storages that move, bytes, predicted step) and per-iteration counters."""
    return _offloader.stats() if _offloader is not None else {}


def storage_mover():
    """The StorageMover of this process (mechanism:storage), or None."""
    return _offloader


def gate_stream(stream, device=None) -> None:
    """Tells tierpack that `stream` (a torch.cuda.Stream or a cudaStream_t as an int) may touch its
    memory on `device` (default: the current one) without allocating on it: the page-group mover then
    holds it at its remap gates (Note [Remap gate]). Call it after the device's first allocation.
    ``Tensor.record_stream`` does the same for the streams it names.

    Not for a stream whose work waits for another process (NCCL's): gating the 32 priority-0 streams
    of PyTorch's stream pool, where ProcessGroupNCCL takes its streams, hung DDP on two H200s in the
    first planned iteration (bench/results/gpu-h200-2026-11-30-4, call 6): a collective kernel queued
    before one rank's gate waits for its peer, whose matching kernel may sit behind the other rank's."""
    if _lib is None:
        raise RuntimeError("tierpack: gate_stream: the GPU tier is not installed")
    import torch

    ptr = stream.cuda_stream if hasattr(stream, "cuda_stream") else int(stream)
    dev = torch.device("cuda", device) if isinstance(device, int) else torch.device(device or "cuda")
    index = dev.index if dev.index is not None else torch.cuda.current_device()
    if _lib.tierpack_cuda_add_stream(index, ctypes.c_void_p(ptr)) != 0:
        raise RuntimeError(last_error())


def step(optimizer=None) -> None:
    """An iteration ended (called by the optimizer-step hook; call it yourself without an optimizer).
    The storage mover never moves the parameters of `optimizer` (the hook passes it)."""
    global _observer
    if _lib is None:
        return
    if _offloader is not None:
        _offloader.iteration_end(optimizer)
        return
    traced_next = _lib.tierpack_gpu_iteration()
    if _observer is not None and not traced_next:
        _observer.__exit__(None, None, None)
        _observer = None
    if traced_next and _observer is None and _observe:
        _observer = _OpObserver()
        _observer.__enter__()


def stats(device: int = 0) -> dict:
    """The GPU tier's statistics: budget, plan, per-iteration moves and stalls."""
    if _offloader is not None:
        return _offloader.stats()
    if _lib is None:
        return {}
    return json.loads(_lib.tierpack_gpu_stats_json(device).decode())


def _make_observer_class():
    import torch
    from torch.utils._python_dispatch import TorchDispatchMode
    from torch.utils._pytree import tree_flatten

    lib = _lib

    def report(tree):
        ptrs = []
        for t in tree_flatten(tree)[0]:
            if isinstance(t, torch.Tensor) and t.is_cuda:
                try:
                    ptrs.append(t.untyped_storage().data_ptr())
                except Exception:
                    pass
        if ptrs:
            arr = (ctypes.c_uint64 * len(ptrs))(*ptrs)
            lib.tierpack_gpu_op_tensors(arr, len(ptrs))

    class OpObserver(TorchDispatchMode):
        """Reports each op's CUDA tensors to the runtime (used for the traced iteration only)."""

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            kwargs = kwargs or {}
            lib.tierpack_gpu_op_begin_named(str(func).encode())
            report((args, kwargs))
            out = func(*args, **kwargs)
            report(out)
            lib.tierpack_gpu_op_end(0)
            return out

    return OpObserver


def _OpObserver():
    cls = globals().get("_observer_class")
    if cls is None:
        cls = _make_observer_class()
        globals()["_observer_class"] = cls
    return cls()


def _patch_stats(torch, lib):
    from torch.cuda._utils import _get_device_index

    def dev(device):
        return _get_device_index(device, optional=True)

    def stat(name):
        return lambda device=None: int(lib.tierpack_gpu_memory_stat(dev(device), name.encode()))

    def reset(device=None):
        lib.tierpack_gpu_reset_peak(dev(device))

    def memory_stats(device=None):
        d = dev(device)
        s = {name: int(lib.tierpack_gpu_memory_stat(d, name.encode()))
             for name in ("allocated", "allocated_peak", "reserved", "reserved_peak", "host", "gpu_budget")}
        return {
            "allocated_bytes.all.current": s["allocated"],
            "allocated_bytes.all.peak": s["allocated_peak"],
            "reserved_bytes.all.current": s["reserved"],
            "reserved_bytes.all.peak": s["reserved_peak"],
            "tierpack.host_bytes.current": s["host"],
            "tierpack.budget_bytes": s["gpu_budget"],
        }

    def memory_summary(device=None, abbreviated=False):
        s = memory_stats(device)
        gib = 1 << 30
        return ("tierpack GPU tier (PyTorch's own counters are not available with a pluggable allocator)\n"
                f"  allocated {s['allocated_bytes.all.current'] / gib:.2f} GiB (peak {s['allocated_bytes.all.peak'] / gib:.2f})\n"
                f"  device memory held {s['reserved_bytes.all.current'] / gib:.2f} GiB (peak {s['reserved_bytes.all.peak'] / gib:.2f}, "
                f"budget {s['tierpack.budget_bytes'] / gib:.2f})\n"
                f"  on host {s['tierpack.host_bytes.current'] / gib:.2f} GiB\n")

    original_empty_cache = torch.cuda.empty_cache

    def empty_cache():
        original_empty_cache()
        lib.tierpack_cuda_empty_cache()

    patches = {
        "memory_allocated": stat("allocated"), "max_memory_allocated": stat("allocated_peak"),
        "memory_reserved": stat("reserved"), "max_memory_reserved": stat("reserved_peak"),
        "reset_peak_memory_stats": reset, "reset_max_memory_allocated": reset,
        "memory_stats": memory_stats, "memory_summary": memory_summary, "empty_cache": empty_cache,
    }
    for name, fn in patches.items():
        setattr(torch.cuda.memory, name, fn)
        setattr(torch.cuda, name, fn)
