"""tierpack for PyTorch: page-aware tensor placement across GPU, DRAM and CXL memory.

Most users never import this: ``tierpack profile -- python train.py`` and ``tierpack run ...`` set
everything up through a sitecustomize bootstrap. A script may still call:

    import tierpack
    tierpack.enable()        # only needed without the tierpack launcher (reads $TIERPACK_CONF)
    ...
    tierpack.step()          # end of a training iteration (optional with a torch optimizer)

Every function here is a no-op (returning False / None) when tierpack is not enabled, so scripts can
call tierpack.step() unconditionally.

The native side is libtierpack_torch.so, found through $TIERPACK_LIB, else next to this package:
tierpack/lib/ when pip installed it, <prefix>/lib/ when `cmake --install` did, build/lib/ in the source
tree (tierpack/_libs.py); tierpack/_native.py loads it and declares its C functions (include/tierpack.h).

``tierpack.__version__`` is the project's VERSION (CMakeLists.txt), the one `tierpack --version` prints.
"""
import atexit
import ctypes
import json
import os
import re
import sys

from tierpack import _module_paths, _native
from tierpack._native import TierpackError

__all__ = ["enable", "enabled", "step", "finish", "status", "library_path", "TierpackError", "__version__"]


def _source_tree_version():
    """The VERSION of the project() in the repository's CMakeLists.txt (the package run from the source tree)."""
    here = os.path.dirname(os.path.abspath(__file__))
    try:
        with open(os.path.join(here, os.pardir, os.pardir, "CMakeLists.txt")) as f:
            match = re.search(r"project\(tierpack\s+VERSION\s+([0-9][0-9.]*)", f.read())
    except OSError:
        match = None
    return match.group(1) if match else "unknown"


try:
    from tierpack._version import __version__  # written by the build (CMake, setup.py)
except ImportError:
    __version__ = _source_tree_version()

ROLE_SAVED_FOR_BACKWARD = 0
ROLE_PARAMETER = 1
ROLE_GRADIENT = 2
ROLE_OPTIMIZER_STATE = 3

_lib = None
_hooks_installed = False


library_path = _native.torch_library_path  # where libtierpack_torch.so is, or None


def _load():
    global _lib
    if _lib is None:
        _lib = _native.torch_library()
    return _lib


def enable(conf=None):
    """Enables tierpack in this process. `conf` uses the TIERPACK_CONF syntax ("mode:profile,...");
    None reads $TIERPACK_CONF. Returns True when enabled (now or before), False when the configuration
    says mode:off. Raises TierpackError when it cannot be enabled."""
    lib = _load()
    rc = lib.tierpack_enable(conf.encode() if conf else None)
    if rc < 0:
        raise TierpackError("tierpack not enabled: " + lib.tierpack_last_error().decode(errors="replace"))
    if rc == 2:
        return False
    # rc 1: the library enabled itself when it was loaded ($TIERPACK_CONF); the Python side is still ours.
    global _hooks_installed
    if not _hooks_installed:
        _hooks_installed = True
        _install_python_hooks()
        atexit.register(finish)
        _sync_recording_hooks()
    # Only this process is profiled: children (data loader workers, subprocesses) must not write the
    # same profile. The native side removed it from the C environment; Python keeps its own copy.
    os.environ.pop("TIERPACK_CONF", None)
    return True


def enabled():
    return _lib is not None and _lib.tierpack_enabled() == 1


def host_side_needed(conf):
    """Whether `conf` (TIERPACK_CONF syntax) gives the host side anything to do (Note [Host side steps aside]
    in core/config.hpp: not when it only sets a GPU budget). Raises TierpackError on a bad configuration.
    Loading the library with $TIERPACK_CONF set enables it: the bootstrap removes it first."""
    lib = _load()
    rc = lib.tierpack_host_side_needed(conf.encode())
    if rc < 0:
        raise TierpackError(lib.tierpack_last_error().decode(errors="replace"))
    return rc == 1


def step():
    """Marks the end of a training iteration."""
    if _lib is not None:
        _lib.tierpack_step()
        _sync_recording_hooks()


def finish():
    """Writes the profile now (also done at exit). Returns True when it was written or nothing was due."""
    if _lib is None:
        return False
    return _lib.tierpack_finish() == 0


def status():
    """The native session's state as a dict ({"mode": "disabled"} before enable())."""
    if _lib is None:
        return {"mode": "disabled"}
    buf = ctypes.create_string_buffer(4096)
    n = _lib.tierpack_status(buf, len(buf))
    if n >= len(buf):
        buf = ctypes.create_string_buffer(n + 1)
        _lib.tierpack_status(buf, len(buf))
    return json.loads(buf.value.decode(errors="replace"))


def version():
    return _load().tierpack_version().decode()


# ---- what only Python knows: which tensors are parameters, gradients, optimizer state -------------

def _mark(tensor, role):
    try:
        ptr = tensor.data_ptr()
    except Exception:  # noqa: BLE001 - sparse / meta tensors have none
        return
    if ptr:
        _lib.tierpack_mark_tensor(ptr, role)


def _mark_optimizer(opt):
    import torch
    for group in opt.param_groups:
        for p in group["params"]:
            _mark(p, ROLE_PARAMETER)
            if p.grad is not None:
                _mark(p.grad, ROLE_GRADIENT)
    for state in opt.state.values():
        for v in state.values():
            if torch.is_tensor(v):
                _mark(v, ROLE_OPTIMIZER_STATE)


def _install_python_hooks():
    """Role marks from torch.optim: parameters when an optimizer is built, and after each step its
    gradients and state, while a profile is being built. The step wrapper is put on the optimizer's
    class (like torch's own profiling hook), so bound methods stay intact for LR schedulers."""
    import functools
    import torch
    opt_cls = torch.optim.Optimizer
    if getattr(opt_cls, "_tierpack_patched", False):
        return
    original_init = opt_cls.__init__

    @functools.wraps(original_init)
    def __init__(self, *args, **kwargs):
        original_init(self, *args, **kwargs)
        cls = self.__class__
        if not getattr(cls.step, "_tierpack_wrapped", False):
            inner = cls.step

            @functools.wraps(inner)
            def step_and_mark(opt, *a, **k):
                out = inner(opt, *a, **k)
                if _lib is not None and _lib.tierpack_wants_marks():
                    _mark_optimizer(opt)
                _sync_recording_hooks()
                return out

            step_and_mark._tierpack_wrapped = True
            cls.step = step_and_mark
        if _lib is not None and _lib.tierpack_wants_marks():
            _mark_optimizer(self)

    opt_cls.__init__ = __init__
    opt_cls._tierpack_patched = True


# ---- saved-for-backward marks: autograd's saved-tensor hooks, only while an iteration is recorded ----

_saved_hooks_on = False


def _gpu_mover():
    """The GPU tier's storage mover, when installed: autograd keeps one set of default saved-tensor hooks,
    so while these hooks are on they hand every saved tensor on to the mover's."""
    cuda = sys.modules.get("tierpack.cuda")
    return cuda.storage_mover() if cuda is not None else None


def _pack_saved(tensor):
    _mark(tensor, ROLE_SAVED_FOR_BACKWARD)
    mover = _gpu_mover()
    return mover.pack(tensor) if mover is not None else tensor


def _unpack_saved(tensor):
    mover = _gpu_mover()
    return mover.unpack(tensor) if mover is not None else tensor


def _sync_recording_hooks():
    """The hooks that run only while a profile is being built: saved-for-backward marks, and the module
    paths of allocations (tierpack/_module_paths.py). Called at the iteration boundaries the Python side
    sees (enable(), step(), optimizer steps)."""
    _sync_saved_tensor_hooks()
    _module_paths.sync(_lib)


def _sync_saved_tensor_hooks():
    """Pushes autograd's default saved-tensor hooks when a recording starts (they mark each tensor
    autograd saves for backward) and pops them when it ends, so the rest of the run keeps autograd's
    normal path. Called at iteration boundaries the Python side sees (optimizer steps, step())."""
    global _saved_hooks_on
    if _lib is None:
        return
    import torch
    recording = _lib.tierpack_recording() == 1
    try:
        if recording and not _saved_hooks_on:
            torch._C._autograd._push_saved_tensors_default_hooks(_pack_saved, _unpack_saved)
            _saved_hooks_on = True
        elif not recording and _saved_hooks_on:
            torch._C._autograd._pop_saved_tensors_default_hooks()
            _saved_hooks_on = False
    except (AttributeError, RuntimeError):
        pass  # a torch without these entry points: no saved-for-backward marks
