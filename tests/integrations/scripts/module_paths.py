# Ground truth for module paths (Note [Module paths] in integrations/torch/python_source.cpp): a line
# tagged `# MODULE: <path> <bytes>` allocates, in the profiled iteration's forward, a tensor of <bytes>
# bytes while the module <path> runs (module_paths_test.py finds the lines from the tags).
#   Block i's Linear output: its line is Block.forward's, its module the Linear (blocks.i.fc, whose
#   forward is torch's own code); the ReLU after it: the Block (blocks.i); the scale at the end: the root,
#   named by its class (Net). Every block has its own width, so each size says which block it was.
import torch

torch.manual_seed(0)
torch.set_num_threads(1)

BATCH, WIDTHS = 8, [64, 96, 160, 224]  # float32: 8 x 96 x 4 = 3072 B, 5120 B, 7168 B


class Block(torch.nn.Module):
    def __init__(self, d_in, d_out):
        super().__init__()
        self.fc = torch.nn.Linear(d_in, d_out)

    def forward(self, x):
        h = self.fc(x)  # MODULE: blocks.0.fc 3072, blocks.1.fc 5120, blocks.2.fc 7168
        return torch.relu(h)  # MODULE: blocks.0 3072, blocks.1 5120, blocks.2 7168


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.blocks = torch.nn.ModuleList(Block(a, b) for a, b in zip(WIDTHS, WIDTHS[1:]))

    def forward(self, x):
        for block in self.blocks:
            x = block(x)
        return x * 0.5  # MODULE: Net 7168


net = Net()
opt = torch.optim.SGD(net.parameters(), lr=0.01)
x = torch.randn(BATCH, WIDTHS[0])
for it in range(4):
    opt.zero_grad()
    loss = net(x).square().mean()
    loss.backward()
    opt.step()
print("loss", float(loss))
