"""tierpack's shared libraries, found and loaded here, with every C signature of include/tierpack.h declared once.

* ``torch_library()``: libtierpack_torch.so (the host side): $TIERPACK_LIB, else this installation's
  (tierpack/_libs.py: pip's tierpack/lib, cmake's <prefix>/lib, the source tree's build/lib). It links one torch
  build: loading it next to another torch is refused (``TierpackError``).
* ``cuda_library(path=None)``: libtierpack_cuda.so (the GPU tier): `path`, $TIERPACK_CUDA_LIB, this installation's,
  <sys.prefix>/lib, or the linker's search path.
* ``cuda_torch_shim(cuda_path)``: libtierpack_cuda_torch.so when this torch can use it.

A library is loaded once per path; its functions carry the argument and result types below, so every caller
(tierpack/__init__.py, cuda.py, copy_streams.py, activations.py, the tests) calls the same declared functions.
"""

import ctypes
import ctypes.util
import os
import sys
import threading

from tierpack import _libs

_i32, _i64, _u64, _size = ctypes.c_int, ctypes.c_int64, ctypes.c_uint64, ctypes.c_size_t
_text, _ptr, _p64 = ctypes.c_char_p, ctypes.c_void_p, ctypes.POINTER(ctypes.c_uint64)

# name: (argument types, result type), as include/tierpack.h declares them.
TORCH_FUNCTIONS = {
    "tierpack_enable": ([_text], _i32),
    "tierpack_enabled": ([], _i32),
    "tierpack_host_side_needed": ([_text], _i32),
    "tierpack_step": ([], _i32),
    "tierpack_finish": ([], _i32),
    "tierpack_mark_tensor": ([_ptr, _i32], _i32),
    "tierpack_wants_marks": ([], _i32),
    "tierpack_recording": ([], _i32),
    "tierpack_wants_sources": ([], _i32),
    "tierpack_module_name": ([_i32, _text], _i32),
    "tierpack_module_enter": ([_i32], None),
    "tierpack_module_exit": ([_i32], None),
    "tierpack_module_reset": ([], None),
    "tierpack_status": ([_text, _size], _size),
    "tierpack_last_error": ([], _text),
    "tierpack_version": ([], _text),
}

CUDA_FUNCTIONS = {
    "tierpack_cuda_malloc": ([ctypes.c_ssize_t, _i32, _ptr], _ptr),
    "tierpack_cuda_malloc_nothrow": ([ctypes.c_ssize_t, _i32, _ptr], _ptr),
    "tierpack_cuda_malloc_status": ([ctypes.c_ssize_t, _i32, _ptr, ctypes.POINTER(_i32)], _ptr),
    "tierpack_cuda_free": ([_ptr, ctypes.c_ssize_t, _i32, _ptr], None),
    "tierpack_cuda_record_stream": ([_ptr, _ptr], None),
    "tierpack_cuda_add_stream": ([_i32, _ptr], _i32),
    "tierpack_cuda_empty_cache": ([], None),
    "tierpack_gpu_configure": ([_text, _text], _i32),
    "tierpack_gpu_iteration": ([], _i32),
    "tierpack_gpu_tracing": ([], _i32),
    "tierpack_gpu_op_begin": ([_i64], None),
    "tierpack_gpu_op_begin_named": ([_text], None),
    "tierpack_gpu_op_tensor": ([_ptr], None),
    "tierpack_gpu_op_tensors": ([_p64, _i64], None),
    "tierpack_gpu_op_end": ([_i64], None),
    "tierpack_gpu_stats_json": ([_i32], _text),
    "tierpack_gpu_memory_stat": ([_i32, _text], _u64),
    "tierpack_settings_json": ([], _text),
    "tierpack_gpu_reset_peak": ([_i32], None),
    "tierpack_gpu_last_error": ([], _text),
    "tierpack_plan_saved": ([_text, _text], _text),
    "tierpack_copies_open": ([_i32], _i32),
    "tierpack_copy_event_new": ([_i32], _u64),
    "tierpack_copy_event_free": ([_i32, _u64], None),
    "tierpack_copy_event_done": ([_i32, _u64], _i32),
    "tierpack_copy_stream_wait": ([_i32, _u64, _u64], _i32),
    "tierpack_copy_batch": ([_i32, _i32, _u64, _u64, _p64, _i32, _p64, _p64, _p64, _i32, _u64], _i32),
}

_loaded = {}  # path -> the declared library
_lock = threading.Lock()


class TierpackError(RuntimeError):
    """tierpack could not be loaded or enabled."""


def _declare(lib, functions):
    for name, (argtypes, restype) in functions.items():
        fn = getattr(lib, name)
        fn.argtypes, fn.restype = argtypes, restype
    return lib


def _open(path, functions):
    with _lock:
        lib = _loaded.get(path)
        if lib is None:
            lib = _loaded[path] = _declare(ctypes.CDLL(path), functions)
        return lib


def major_minor(version):
    """(2, 11) of "2.11.0+cu128"."""
    parts = version.split("+")[0].split(".")
    return tuple(int("".join(ch for ch in p if ch.isdigit()) or 0) for p in parts[:2])


def torch_library_path():
    """Where libtierpack_torch.so is, or None."""
    here = os.path.dirname(os.path.abspath(__file__))
    candidates = [os.environ.get("TIERPACK_LIB"),
                  _libs.installed_library("libtierpack_torch.so"),  # tierpack/lib, <prefix>/lib, build/lib
                  os.path.join(here, "libtierpack_torch.so")]
    for c in candidates:
        if c and os.path.isfile(c):
            return os.path.abspath(c)
    return None


def _check_torch_version(path):
    """The library links one torch build; loading it next to another torch would crash later."""
    import torch
    stamp = os.path.join(os.path.dirname(path), "libtierpack_torch.torch-version")
    try:
        with open(stamp) as f:
            built = f.read().strip()
    except OSError:
        return  # no stamp (an older build): nothing to compare
    if built and major_minor(built) != major_minor(torch.__version__):
        raise TierpackError("%s was built against torch %s but this Python (%s) has torch %s: rebuild tierpack "
                            "against it (TIERPACK_PYTHON=%s cmake ...)" % (path, built, sys.executable,
                                                                          torch.__version__, sys.executable))


def torch_library():
    """libtierpack_torch.so, loaded and declared. Loading it with $TIERPACK_CONF set enables tierpack (its
    constructor). Raises TierpackError when it is missing, was built against another torch, or does not load."""
    if "torch" not in sys.modules:
        import torch  # noqa: F401  (the library links the torch this Python has loaded)
    path = torch_library_path()
    if path is None:
        raise TierpackError("libtierpack_torch.so not found: set TIERPACK_LIB, or build tierpack with "
                            "-DTIERPACK_WITH_TORCH=ON and run through `tierpack profile`")
    if path not in _loaded:
        _check_torch_version(path)
    try:
        return _open(path, TORCH_FUNCTIONS)
    except OSError as e:
        hint = ""
        if "static TLS" in str(e):
            hint = (" (jemalloc needs static TLS space in a process that loads it late: set "
                    "GLIBC_TUNABLES=glibc.rtld.optional_static_tls=65536 before starting Python, "
                    "as `tierpack profile` does)")
        raise TierpackError("cannot load %s: %s%s" % (path, e, hint)) from None


def cuda_library_path():
    """Where libtierpack_cuda.so is: $TIERPACK_CUDA_LIB, this installation's (pip's, cmake --install's or the
    build tree's), <sys.prefix>/lib, or the linker's search path. Raises FileNotFoundError."""
    env = os.environ.get("TIERPACK_CUDA_LIB")
    if env:
        return env
    installed = _libs.installed_library("libtierpack_cuda.so")
    if installed:
        return installed
    c = os.path.join(sys.prefix, "lib", "libtierpack_cuda.so")
    if os.path.exists(c):
        return c
    found = ctypes.util.find_library("tierpack_cuda")
    if found:
        return found
    raise FileNotFoundError("tierpack: libtierpack_cuda.so not found (set TIERPACK_CUDA_LIB or build with CUDA)")


def cuda_library(path=None):
    """libtierpack_cuda.so (`path`, else cuda_library_path()), loaded and declared."""
    return _open(path or cuda_library_path(), CUDA_FUNCTIONS)


def cuda_torch_shim(cuda_path):
    """libtierpack_cuda_torch.so ($TIERPACK_CUDA_TORCH_LIB, else next to `cuda_path`) when this torch can use it:
    (its path, ""), else (None, why). PyTorch's CUDAPluggableAllocator loads it by path."""
    import torch

    shim = os.environ.get("TIERPACK_CUDA_TORCH_LIB") or os.path.join(os.path.dirname(cuda_path),
                                                                      "libtierpack_cuda_torch.so")
    if not os.path.exists(shim):
        return None, shim + " not found"
    stamp = shim[: -len(".so")] + ".torch-version"
    try:
        with open(stamp) as f:
            built = f.read().strip()
    except OSError:
        return None, stamp + " missing (which torch the shim was built against is unknown)"
    if major_minor(built) != major_minor(torch.__version__):
        return None, "%s was built against torch %s, this is torch %s" % (shim, built, torch.__version__)
    try:
        ctypes.CDLL(shim)
    except OSError as e:
        return None, "%s does not load: %s" % (shim, e)
    return shim, ""
