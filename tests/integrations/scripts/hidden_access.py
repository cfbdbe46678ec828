# A page touched behind the framework's back: ctypes writes into a tensor between ops, where no
# reported op uses it. The profile must flag that tensor (and only it) as having hidden accesses.
import ctypes

import torch
from torch.autograd.profiler import record_function as scope

import tierpack

big = torch.zeros(4 * 4096 // 4)  # 4 pages, page-aligned in the profiling arena
for it in range(3):
    with scope("tp.compute"):
        y = torch.ones(1024) + 1.0
    ctypes.memset(big.data_ptr(), it + 1, 4 * 4096)  # no op running, no op uses `big`
    with scope("tp.after"):
        z = y * 2.0
    del y, z
    tierpack.step()
print("byte", int(big.view(torch.uint8)[0]))
