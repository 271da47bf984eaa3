"""The issue's exactness case: torch.mm of (512×1024)·(1024×256) in fp32, called N times (argv[1],
default 1)."""

import sys

import torch

torch.set_num_threads(1)  # shared 2-core test machines: avoid OpenMP spinning
a = torch.randn(512, 1024)
b = torch.randn(1024, 256)
for _ in range(int(sys.argv[1]) if len(sys.argv) > 1 else 1):
    torch.mm(a, b)
