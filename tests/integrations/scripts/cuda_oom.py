"""On a GPU: tierpack's allocator with a small budget and spilling off raises torch.OutOfMemoryError
(with libtierpack_cuda_torch.so built against this torch next to libtierpack_cuda.so), and the
process allocates again after freeing. Exit status 0 when both hold.

    TIERPACK_CUDA_LIB=build/lib/libtierpack_cuda.so /usr/bin/python3 tests/integrations/scripts/cuda_oom.py
"""
import sys

import torch

import tierpack.cuda as tc

tc.install(budget="2G", gpu="mechanism:vmm,spill:off,migrate:off")
print("out of memory raises:", tc.oom_error_class())
blocks = []
try:
    for _ in range(64):
        blocks.append(torch.empty(256 << 20, dtype=torch.uint8, device="cuda"))
    print("FAIL: 16 GiB allocated under a 2 GiB budget")
    sys.exit(1)
except torch.OutOfMemoryError as e:
    print("torch.OutOfMemoryError after %d x 256 MiB: %s" % (len(blocks), str(e).splitlines()[0][:400]))
except RuntimeError as e:
    print("FAIL: RuntimeError, not torch.OutOfMemoryError: %s" % str(e).splitlines()[0][:400])
    sys.exit(1)
blocks.clear()
y = torch.ones(256 << 20, dtype=torch.uint8, device="cuda")
ok = bool((y == 1).all().item())  # (y.sum() would promote to an int64 copy: 2 GiB, the whole budget)
print("allocated again after freeing: 256 MiB of ones %s" % ("intact" if ok else "WRONG"))
sys.exit(0 if ok else 1)
