"""A torch.compile'd training step (Inductor; its C++ backend on CPU): 4 optimizer steps of a tiny MLP."""

import os

import torch


class Block(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc1 = torch.nn.Linear(16, 32)
        self.fc2 = torch.nn.Linear(32, 16)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc2(torch.relu(self.fc1(x)))


class Net(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.block = Block()
        self.head = torch.nn.Linear(16, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.block(x))


torch.manual_seed(0)
torch.set_num_threads(1)
model = Net()
compiled = torch.compile(model, backend=os.environ.get("COMPILE_BACKEND", "inductor"))
opt = torch.optim.SGD(model.parameters(), lr=0.01)
x = torch.randn(8, 16)
for _ in range(4):
    opt.zero_grad()
    compiled(x).square().mean().backward()
    opt.step()
