"""Collectors: wrap a real run (NVTX ranges, torch.profiler, Nsight Compute) and measure the device's
ceilings."""
