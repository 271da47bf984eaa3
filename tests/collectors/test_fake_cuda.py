"""The CUDA control flow of `nsroof profile` and `nsroof measure`, run without a GPU: torch.cuda is replaced
by a simulated device, and torch 2.13's real EventMetadata NamedTuple (torch/autograd/profiler_util.py)
is what a FunctionEvent carries, as on a GPU. What the first GPU run would hit, these hit first.

The simulated device (FakeCuda): the host spends `launch_s` per launch (a fake perf_counter clock); the
device runs each queued item after the previous one and never before the host queued it; events take the
device time at which the stream reaches them.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

torch = pytest.importorskip("torch")

from nsroof.roofs.machines import Machine  # noqa: E402


@dataclass
class FakeCuda:
    launch_s: float = 10e-6  # host time per launch: Python and the driver
    cycles_per_s: float = 1.5e9
    host: float = 0.0
    device_free: float = 0.0
    launches: list[str] = field(default_factory=list)

    def enqueue(self, what: str, device_s: float) -> float:
        self.host += self.launch_s
        start = max(self.device_free, self.host)
        self.device_free = start + device_s
        self.launches.append(what)
        return self.device_free

    def perf_counter(self) -> float:
        return self.host

    def synchronize(self) -> None:
        self.host = max(self.host, self.device_free)


class FakeEvent:
    def __init__(self, cuda: FakeCuda) -> None:
        self.cuda = cuda
        self.at: float | None = None

    def record(self) -> None:
        self.at = self.cuda.enqueue("event", 0.0)

    def query(self) -> bool:
        return self.at is not None and self.at <= self.cuda.host

    def synchronize(self) -> None:
        assert self.at is not None
        self.cuda.host = max(self.cuda.host, self.at)

    def elapsed_time(self, end: FakeEvent) -> float:
        assert self.at is not None and end.at is not None
        return (end.at - self.at) * 1e3  # ms, as torch reports it


def _install(monkeypatch: pytest.MonkeyPatch, cuda: FakeCuda) -> None:
    from nsroof.collectors.measure import timing

    monkeypatch.setattr(torch.cuda, "Event", lambda enable_timing=True: FakeEvent(cuda))
    monkeypatch.setattr(torch.cuda, "synchronize", cuda.synchronize)
    monkeypatch.setattr(torch.cuda, "_sleep",
                        lambda cycles: cuda.enqueue("sleep", cycles / cuda.cycles_per_s))
    monkeypatch.setattr(timing.time, "perf_counter", cuda.perf_counter)


def test_the_cuda_timer_times_the_device_not_python(monkeypatch: pytest.MonkeyPatch) -> None:
    """A 2 µs kernel launched every 10 µs: events around back-to-back launches would read 10 µs per call
    (the device idles waiting for Python); with the queued sleep they read the 2 µs of device time."""
    from nsroof.collectors.measure.timing import CudaTimer

    cuda = FakeCuda(launch_s=10e-6)
    _install(monkeypatch, cuda)
    timer = CudaTimer(min_sample_s=1e-3)
    t = timer.time(lambda i: cuda.enqueue("gemm", 2e-6), warmup=3, reps=5)
    assert t.median_s == pytest.approx(2e-6, rel=1e-9)
    assert t.clock == "cuda-events+queued-sleep"
    assert "sleep" in cuda.launches
    # inner = ceil(1 ms / the timed warm-up call) = ceil(1 ms / 20 µs) = 50: between its two events the
    # host spent 10 µs launching the call and 10 µs recording the end event, and the device followed it
    assert t.inner == 50


def test_a_sleep_too_short_is_noticed_and_doubled(monkeypatch: pytest.MonkeyPatch) -> None:
    """Python slows down after the warm-up (e.g. the allocator): the device catches up with the host, the
    start event has completed before the batch is queued, and the sample is taken again with a longer
    sleep."""
    from nsroof.collectors.measure.timing import CudaTimer

    cuda = FakeCuda(launch_s=1e-6)
    _install(monkeypatch, cuda)
    timer = CudaTimer(min_sample_s=1e-4)
    calls = {"n": 0}

    def gemm(i: int) -> None:
        calls["n"] += 1
        if calls["n"] > 3:
            cuda.launch_s = 20e-6  # slower launches than the warm-up measured
        cuda.enqueue("gemm", 2e-6)

    t = timer.time(gemm, warmup=3, reps=3)
    assert timer.caught_up >= 1
    assert t.median_s == pytest.approx(2e-6, rel=1e-9)


def test_measure_asks_nvidia_smi_by_uuid(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """torch's device index counts only CUDA_VISIBLE_DEVICES; nvidia-smi must be asked by the UUID."""
    import os
    import stat
    import sys
    from types import SimpleNamespace

    from nsroof.collectors.measure import environment

    log = tmp_path / "smi.log"
    smi = tmp_path / "nvidia-smi"
    smi.write_text(f"#!{sys.executable}\nimport sys\nopen({str(log)!r}, 'w').write(' '.join(sys.argv[1:]))\n"
                   "print('550.54.15, 1980, 2619, 1980, 2619, 700.00, P0, 35')\n")
    smi.chmod(smi.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "3")
    props = SimpleNamespace(name="NVIDIA H100 80GB HBM3", major=9, minor=0, multi_processor_count=132,
                            total_memory=80 << 30, shared_memory_per_multiprocessor=233472,
                            L2_cache_size=50 << 20, uuid="8b1f7a3e-0c55-11ee-be56-0242ac120002")
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)
    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda i: props)
    env = environment.describe_cuda()
    assert "--id=GPU-8b1f7a3e-0c55-11ee-be56-0242ac120002" in log.read_text()
    assert env["device_uuid"] == "GPU-8b1f7a3e-0c55-11ee-be56-0242ac120002"
    assert env["driver_version"] == "550.54.15" and env["power_limit_w"] == "700.00"
    # no UUID: nvidia-smi is not asked at all (an index could read another card)
    log.unlink()
    assert environment.nvidia_smi_query(environment.smi_id(None)) == {}
    assert not log.exists()


def test_fp8_shapes_follow_scaled_mm_requirements() -> None:
    from nsroof.collectors.measure.gemm import GemmShape, shape_reason

    assert shape_reason("fp8", GemmShape(1, 4096, 4096, "gemv")) is None  # decode: M = 1 is allowed
    assert shape_reason("fp8", GemmShape(7, 4096, 4096, "x")) is None
    assert (shape_reason("fp8", GemmShape(16, 4100, 4096, "x"))
            == "torch._scaled_mm needs K and N divisible by 16")
    assert shape_reason("fp8", GemmShape(16, 4096, 4104, "x")) is not None


# --------------------------------------------------------------------------- nsroof.profile on a fake GPU


def _event_metadata() -> Any:
    """A real torch 2.13 EventMetadata, filled as kineto fills it for a kernel."""
    from torch.autograd.profiler_util import EventMetadata

    fields = {name: None for name in EventMetadata._fields}
    fields.update(registers_per_thread=128, shared_memory=49152, grid=[132, 1, 1], block=[256, 1, 1])
    return EventMetadata(**fields)


def test_profile_on_cuda_builds_the_report_from_the_trace(monkeypatch: pytest.MonkeyPatch,
                                                          tmp_path: Path) -> None:
    """torch.cuda says an H100 is there. The profiler's FunctionEvents carry a real EventMetadata (what
    crashed the old FunctionEvent path with AttributeError: 'EventMetadata' has no 'lstrip'); the exported
    trace gets the kernel and launch kineto writes on a GPU, correlated to the aten::mm of the run."""
    from torch.autograd.profiler_util import FunctionEvent
    from torch.profiler import profile as torch_profile

    import nsroof
    from nsroof.collectors import torch_profile as tp

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda *a: "NVIDIA H100 80GB HBM3")
    monkeypatch.setattr(torch.cuda, "synchronize", lambda *a: None)  # the profiler syncs the device on exit
    real_events = torch_profile.events

    def events_with_metadata(self: Any) -> Any:
        events = real_events(self)
        for e in events:
            if isinstance(e, FunctionEvent):
                e.event_metadata = _event_metadata()
        return events

    monkeypatch.setattr(torch_profile, "events", events_with_metadata)
    real_export = torch_profile.export_chrome_trace

    def export_with_gpu(self: Any, path: str, *args: Any, **kwargs: Any) -> Any:
        self.events()  # whatever reads FunctionEvents sees EventMetadata
        plain = Path(path).with_suffix(".plain.json")
        real_export(self, str(plain))
        data = json.loads(plain.read_text())
        mm = next(e for e in data["traceEvents"] if e.get("name") == "aten::mm")
        launch_ts = mm["ts"] + mm["dur"] / 2
        data["deviceProperties"] = [{"id": 0, "name": "NVIDIA H100 80GB HBM3", "computeMajor": 9,
                                     "computeMinor": 0}]
        data["traceEvents"] += [
            {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": mm["pid"], "tid": mm["tid"],
             "ts": launch_ts, "dur": 0.001,
             "args": {"External id": mm["args"]["External id"], "correlation": 77}},
            {"ph": "X", "cat": "kernel", "name": "sm90_xmma_gemm_f32f32_tf32f32_f32_tn_n", "pid": 0, "tid": 7,
             "ts": launch_ts + 5, "dur": 40.0,
             "args": {"correlation": 77, "device": 0, "stream": 7, "grid": [132, 1, 1], "block": [256, 1, 1],
                      "registers per thread": 128, "shared memory": 49152}},
            {"ph": "X", "cat": "cuda_sync", "name": "Context Sync", "pid": 0, "tid": 4294967295,
             "ts": launch_ts + 50, "dur": 1.0, "args": {"device": 0}},
        ]
        import gzip

        text = json.dumps(data).encode()
        Path(path).write_bytes(gzip.compress(text) if path.endswith(".gz") else text)  # as kineto writes it

    monkeypatch.setattr(torch_profile, "export_chrome_trace", export_with_gpu)
    h100 = Machine(name="test-h100", source="file", peak_flop_per_s={"fp32": 6.7e13, "tf32": 4.95e14},
                   simt_flop_per_s={"fp32": 6.7e13}, bandwidth_bytes_per_s={"dram": 3.35e12})
    a, b = torch.randn(512, 1024), torch.randn(1024, 256)
    torch.backends.cudnn.allow_tf32 = True
    old = torch.get_float32_matmul_precision()
    torch.set_float32_matmul_precision("high")
    try:
        with nsroof.profile(machine=h100, trace=tmp_path / "run.trace.json.gz") as prof:
            torch.mm(a, b)
    finally:
        torch.set_float32_matmul_precision(old)
    assert prof.result is not None and prof.result.trace.is_file()
    report = prof.report.frame  # nsroof.profile's .report is a Report (nsroof.api)
    assert len(report) == 1  # the kernel; the Context Sync is not a row
    row = report.iloc[0]
    assert (row["kernel_name"], row["op"]) == ("sm90_xmma_gemm_f32f32_tf32f32_f32_tn_n", "aten::mm")
    assert row["duration_s"] == pytest.approx(40e-6) and row["device"] == "NVIDIA H100 80GB HBM3"
    # the mm's whole cost on its one kernel, judged against the TF32 roof ('high' allows TF32)
    assert row["flops"] == 2 * 512 * 1024 * 256 and row["precision"] == "tensor"
    assert row["peak_flop_per_s"] == 4.95e14
    facts = prof.result.trace_facts
    assert facts["device"] == "NVIDIA H100 80GB HBM3"
    assert ((facts["tf32"]["matmul"], facts["tf32"]["matmul_precision"], facts["tf32"]["cudnn"])
            == (True, "high", True))
    assert prof.result.metadata["inputs"][0]["facts"]["tf32"]["rows"] == 1
    assert issubclass(nsroof.profile, tp.profile)  # the facade's: the same session, .report a Report


def test_profile_on_cuda_prefers_the_gpus_measured_profile(monkeypatch: pytest.MonkeyPatch,
                                                           tmp_path: Path) -> None:
    """`nsroof measure --device cuda` caches one profile per GPU name; `nsroof profile` then judges against
    it instead of the datasheet (a measured roof is the one the device really reaches)."""
    from nsroof.collectors.measure.cache import gpu_cache_path
    from nsroof.collectors.torch_profile import resolve_machine

    monkeypatch.setenv("NSROOF_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda *a: "NVIDIA H100 80GB HBM3")
    warnings: list[str] = []
    # nothing cached: the datasheet
    assert resolve_machine(None, cuda=True, warnings=warnings).name == "H100 SXM"
    measured = Machine(name="H100 measured", source="measured", environment={"device": "cuda"},
                       peak_flop_per_s={"bf16": 7.1e14},
                       bandwidth_bytes_per_s={"dram": 2.9e12})
    path = gpu_cache_path("NVIDIA H100 80GB HBM3")
    assert path == tmp_path / "cuda-nvidia-h100-80gb-hbm3.json"
    measured.save(path)
    found = resolve_machine(None, cuda=True, warnings=warnings)
    assert (found.name, found.source, found.peak_flop_per_s["bf16"]) == ("H100 measured", "measured", 7.1e14)
    path.write_text("{not json")  # a damaged cache file is not trusted: back to the datasheet
    assert resolve_machine(None, cuda=True, warnings=warnings).name == "H100 SXM" and warnings == []
