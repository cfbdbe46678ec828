# A variable-shape workload: iteration 3 runs a larger batch. The profile must say that iteration 3
# (and only it) allocated differently from the profiled one.
import torch

torch.manual_seed(0)
model = torch.nn.Linear(32, 8)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for it in range(5):
    batch = 24 if it == 3 else 16
    x = torch.randn(batch, 32)
    opt.zero_grad()
    loss = model(x).square().mean()
    loss.backward()
    opt.step()
print("loss", float(loss))
