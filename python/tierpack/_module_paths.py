"""Module paths: which nn.Module's forward runs when a tensor is allocated (Note [Module paths] in
integrations/torch/python_source.cpp).

While the profiler records source lines (tierpack_wants_sources()), torch's global forward pre- and
post-hooks tell libtierpack_torch.so which module runs on the thread: a number per distinct path, whose
text it learns once. The native side keeps the per-thread stack and reads its top when an allocation's
source line is read: no Python runs per allocation for it. The hooks come off when the recorder no
longer wants sources (after the profiled iteration), since they slow every module call down.
"""
import weakref

_lib = None
_handles = []
_ids = weakref.WeakKeyDictionary()  # module -> id of its path
_path_ids = {}                      # path -> id (ids 0, 1, ... in order of first use)
_roots = []                         # weak references to the modules named as roots


def _id_for(path):
    i = _path_ids.get(path)
    if i is None:
        i = _path_ids[path] = len(_path_ids)  # taken before the call, which lets other threads run
        if _lib.tierpack_module_name(i, path.encode("utf-8", "replace")) != 0:
            i = _path_ids[path] = -1  # not accepted (too many paths): its allocations go to the enclosing module
    return i


def _name_tree(root, root_path):
    """Names `root` and every module under it that has no name yet, as root.named_modules() names them."""
    for name, m in root.named_modules():
        if m not in _ids:
            _ids[m] = _id_for(name if name else root_path)


def _id_of(module):
    i = _ids.get(module)
    if i is not None:
        return i
    # Added under a root after it was named (a lazily built layer)? Then that root names it.
    for ref in list(_roots):
        root = ref()
        if root is None:
            _roots.remove(ref)
            continue
        if any(m is module for m in root.modules()):
            _name_tree(root, type(root).__name__)
            break
    else:
        # A module no known root holds: a root itself, named by its class ("GPT2LMHeadModel").
        _roots.append(weakref.ref(module))
        _name_tree(module, type(module).__name__)
    return _ids[module]


def _pre_hook(module, inputs):
    _lib.tierpack_module_enter(_id_of(module))


def _post_hook(module, inputs, output):
    i = _ids.get(module)
    if i is not None:
        _lib.tierpack_module_exit(i)


def sync(lib):
    """Puts the hooks on while the recorder wants sources and takes them off when it stops (called at
    the iteration boundaries the Python side sees); clears the calling thread's module stack."""
    global _lib
    import torch
    if lib is None:
        return
    _lib = lib
    lib.tierpack_module_reset()
    wanted = lib.tierpack_wants_sources() == 1
    if wanted and not _handles:
        mm = torch.nn.modules.module
        _handles.append(mm.register_module_forward_pre_hook(_pre_hook))
        _handles.append(mm.register_module_forward_hook(_post_hook))
    elif not wanted and _handles:
        for h in _handles:
            h.remove()
        del _handles[:]
