# Two tensors of different lifetimes on one page: a small persistent tensor and small temporaries
# made every iteration land in the same jemalloc slab page of the profiling arena.
import torch
from torch.autograd.profiler import record_function as scope

import tierpack

w = torch.ones(8)  # 32 B, alive throughout
for it in range(3):
    with scope("tp.tmp"):
        t = torch.ones(8) * 2.0  # 32 B temporaries
        s = float((t + w).sum())
        del t
    tierpack.step()
print("sum", s)
