# A training loop fed by DataLoader worker processes (fork): the workers inherit the profiled process
# but must not record or write anything; the parent's profile must come out whole.
import torch
from torch.utils.data import DataLoader, TensorDataset

torch.manual_seed(0)
data = TensorDataset(torch.randn(256, 16), torch.randint(0, 4, (256,)))
loader = DataLoader(data, batch_size=32, num_workers=2)
model = torch.nn.Linear(16, 4)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for x, y in loader:
    opt.zero_grad()
    loss = torch.nn.functional.cross_entropy(model(x), y)
    loss.backward()
    opt.step()
print("loss", float(loss))
