"""`GPU_CHECK_FAKE=1 make gpu-check`: the simulated CUDA device its `nsroof measure --device cuda` step runs on.

Python imports this at start-up when the folder is on PYTHONPATH; it acts only with GPU_CHECK_FAKE_CUDA=1
(scripts/gpu_check.sh sets both for that one step). torch.cuda is replaced by the simulated device the
tests already use (HostDevice and FakeEvent of tests/collectors/measure/test_fake_cuda_measure.py: the stream runs
the CPU ops queued on it, `_sleep` queues device time, events take the time the stream reaches them), the
sweep's tensors land on the CPU (timing.allocation_device), and the plan keeps its structure with
CPU-sized knobs (tiny GEMM shapes, 4 MiB ladder calls, no spin-up), as that test's _small_plan does. The
numbers are the CPU's: the run checks the script's control flow, never a speed.
"""

from __future__ import annotations

import os


def _install() -> None:
    import dataclasses
    import importlib.util
    import sys
    from pathlib import Path
    from types import SimpleNamespace

    import torch

    from nsroof.collectors.measure import plan, runner, timing

    path = Path(__file__).resolve().parents[2] / "tests" / "collectors" / "measure" / "test_fake_cuda_measure.py"
    spec = importlib.util.spec_from_file_location("nsroof_fake_cuda", path)
    assert spec is not None and spec.loader is not None
    fake = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = fake  # its dataclasses look their module up there
    spec.loader.exec_module(fake)
    device = fake.HostDevice()
    props = SimpleNamespace(name=fake.NAME, major=9, minor=0, multi_processor_count=132, total_memory=80 << 30,
                            shared_memory_per_multiprocessor=fake.L1_BYTES, L2_cache_size=fake.L2_BYTES,
                            uuid=fake.CUuuid(fake.UUID))
    cuda = torch.cuda
    for name, value in (("is_available", True), ("device_count", 1), ("current_device", 0),
                        ("get_device_name", fake.NAME), ("get_device_properties", props),
                        ("get_device_capability", (9, 0)), ("mem_get_info", (fake.FREE_BYTES, 80 << 30)),
                        ("empty_cache", None)):
        setattr(cuda, name, lambda *a, _v=value, **k: _v)
    cuda.synchronize = device.synchronize
    cuda._sleep = device.sleep
    cuda.Event = lambda enable_timing=False, **kw: fake.FakeEvent(device, enable_timing)
    torch.version.cuda = "12.8"
    timing.allocation_device = lambda where: "cpu"
    real_make_plan = plan.make_plan

    def small_plan(*args: object, **kwargs: object) -> plan.Plan:
        return dataclasses.replace(real_make_plan(*args, **kwargs), ladder_bytes_per_call=4 << 20, spin_up_s=0.0,
                                   squares=(64, 128), projections=((128, 64, "proj 128->64"),), m_sweep=(1, 16))

    runner.make_plan = small_plan


if os.environ.get("GPU_CHECK_FAKE_CUDA") == "1":
    _install()
