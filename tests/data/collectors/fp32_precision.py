"""TF32 allowed through torch's current API (what transformers does), then a small training step."""

import torch

torch.backends.cuda.matmul.fp32_precision = "tf32"
torch.backends.cudnn.conv.fp32_precision = "tf32"
torch.set_num_threads(1)
model = torch.nn.Linear(32, 32)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for _ in range(3):
    model(torch.randn(8, 32)).sum().backward()
    opt.step()
