# Ground truth for tierpack's profiler: an iteration whose tensors, ops and lifetimes are known.
# Every step is its own user scope (tp.*), so the test finds ops and tensors by scope and size:
#   w     8000 B  allocated before the loop, alive throughout           (persistent)
#   a    24000 B  made in tp.make_a, read (as a view) in tp.add, freed in tp.free_a
#   b    40000 B  made in tp.make_b, filled there, read in tp.add, freed in tp.free_bc
#   tmp   8000 B  first sum inside tp.add, dies inside tp.add
#   c     8000 B  made in tp.add, read in tp.mul, freed in tp.free_bc
#   d     8000 B  made in tp.mul, freed in tp.keep
#   keep   128 B  made in tp.keep, alive into the next iteration (the previous one dies in tp.keep)
import torch
from torch.autograd.profiler import record_function as scope

import tierpack

torch.set_num_threads(1)
w = torch.full((1000,), 0.5, dtype=torch.float64)
keep = torch.zeros(16, dtype=torch.float64)
for it in range(3):
    with scope("tp.make_a"):
        a = torch.ones(3000, dtype=torch.float64)
    with scope("tp.make_b"):
        b = torch.empty(5000, dtype=torch.float64)
        b.fill_(2.0)
    with scope("tp.add"):
        c = a[:1000] + b[1000:2000] + w
    with scope("tp.free_a"):
        del a
    with scope("tp.mul"):
        d = c * 3.0
    with scope("tp.free_bc"):
        del b, c
    with scope("tp.keep"):
        old = keep
        keep = d.sum().reshape(1).repeat(16)
        del old, d
    tierpack.step()
print("result", float(keep[0]))
