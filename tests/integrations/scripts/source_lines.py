# Ground truth for the Python source line of each tensor (Note [Python source] in
# integrations/torch/python_source.cpp): every tensor of known size is allocated on a line tagged
# `# SOURCE: <name>`, and the test finds the line numbers from these tags (no numbers to keep in step).
#   weight   8000 B  Net.__init__, before the loop (a parameter: the profile keeps its source from warm-up)
#   input   24000 B  make_input(), called from the loop
#   product  8000 B  Net.forward (through nn.Module.__call__, torch's own file: skipped)
import torch

import tierpack

torch.set_num_threads(1)


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.full((1000,), 0.5, dtype=torch.float64))  # SOURCE: weight

    def forward(self, x):
        product = x * self.weight  # SOURCE: product
        return product.sum()


def make_input():
    return torch.ones(3000, dtype=torch.float64)  # SOURCE: input


net = Net()
with torch.no_grad():
    for it in range(3):
        x = make_input()
        y = net(x[:1000])
        del x
        tierpack.step()
print("result", float(y))
