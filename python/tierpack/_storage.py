"""Storage and autograd helpers shared by the storage mover (activations.py) and module recompute
(module_recompute.py): torch 1.13 and 2.x spellings in one place."""

VIEW_OPS = frozenset(("TBackward0", "ViewBackward0", "TransposeBackward0", "PermuteBackward0",
                      "UnsafeViewBackward0", "AliasBackward0", "ReshapeAliasBackward0"))


def untyped(t):
    return t.untyped_storage() if hasattr(t, "untyped_storage") else t.storage().untyped()


def storage_getter(torch):
    """untyped() for the hooks' hot path: torch 1.13's storage() builds a TypedStorage (~1 us on the CPU) around
    what Tensor._storage() returns, so a plain tensor's is taken from there."""
    if hasattr(torch.Tensor, "untyped_storage"):
        return untyped
    plain, storage = torch.Tensor, torch.Tensor._storage
    return lambda t: storage(t) if type(t) is plain else t.storage().untyped()


def on_storage(torch, storage, dtype, device, offset, size, stride):
    """A tensor of `dtype` over `storage` (an UntypedStorage) at (offset, size, stride)."""
    base = torch.empty(0, dtype=dtype, device=device)
    if hasattr(base, "untyped_storage"):
        return base.set_(storage, offset, size, stride)
    return base.set_(torch.storage.TypedStorage(wrap_storage=storage, dtype=dtype), offset, size, stride)


def flat_bytes(torch, storage, device):
    """The whole storage as a flat uint8 tensor (what one copy moves)."""
    n = storage.nbytes()
    return on_storage(torch, storage, torch.uint8, device, 0, (n,), (1,))


def resident(rec):
    """The storage a record has on the device now (its own, or the one fetched or made back), or None."""
    if rec.storage is not None:
        return rec.storage
    return untyped(rec.fetched) if rec.fetched is not None else None


def through_views(node):
    """The op under at most 3 view ops (a linear layer saves its input as a 2-D view, its weight cast
    transposed): views share their base's storage."""
    steps = 0
    while node is not None and type(node).__name__ in VIEW_OPS and steps < 3:
        node = node.next_functions[0][0] if node.next_functions else None
        steps += 1
    return node


def autocast_cache_on(torch):
    f = getattr(torch, "is_autocast_cache_enabled", None)
    return bool(f()) if f is not None else True


def autocast_on(torch, device_type):
    """Whether autocast is on for the device type (torch 2.4+ takes the type; older ones have one call each)."""
    try:
        return bool(torch.is_autocast_enabled(device_type))
    except TypeError:
        return bool(torch.is_autocast_cpu_enabled() if device_type == "cpu" else torch.is_autocast_enabled())


def autocast_state_getter(torch, device_type):
    """() -> (enabled, dtype, cache) of autocast for the device type now, with this torch's spellings chosen once
    (a module hook reads it at every call; torch < 2.4 raised a TypeError in autocast_on every time)."""
    try:
        torch.is_autocast_enabled(device_type)
        enabled = lambda: bool(torch.is_autocast_enabled(device_type))  # noqa: E731
    except TypeError:
        old = torch.is_autocast_cpu_enabled if device_type == "cpu" else torch.is_autocast_enabled
        enabled = lambda: bool(old())  # noqa: E731
    get = getattr(torch, "get_autocast_dtype", None)
    if get is not None:
        dtype = lambda: get(device_type)  # noqa: E731
    else:
        dtype = torch.get_autocast_cpu_dtype if device_type == "cpu" else torch.get_autocast_gpu_dtype
    cache = getattr(torch, "is_autocast_cache_enabled", None)
    return lambda: (enabled(), dtype(), bool(cache()) if cache is not None else True)


def weak_ref(torch):
    """A maker of weak references to storages (``.expired()``: the storage was freed), or None where this torch has
    none (python/tierpack/budget.py, Note [Held storages])."""
    try:
        from torch.multiprocessing.reductions import StorageWeakRef
    except ImportError:
        return None
    return StorageWeakRef
