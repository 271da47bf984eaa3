"""A whole `nsroof measure --device cuda` sweep on a CPU-only torch: the real runner, GEMM sweep (every dtype,
fp8 through torch._scaled_mm), streams, cache ladder, CUDA-event timer, environment query, summary, cache
write and `to_machine()`, with only torch.cuda replaced. What the first GPU run would trip over in the
control flow (an AttributeError, a TypeError, a torch.cuda call the fake does not offer), this trips first.
It says nothing about speeds: the "device" is the CPU.

The fake device (HostDevice). Its kernels are the CPU ops of the sweep, which finish before Python returns
from launching them, so host time spent between two stream calls (`_sleep`, `Event.record`, a synchronize)
is device work queued behind what the stream already holds; `_sleep(cycles)` queues cycles / clock of
device time; an event completes when the stream reaches it, and synchronizing waits (really sleeps) until
then. So events bracket the real CPU time of the calls between them, the queued sleep really keeps the
stream ahead of the host, and `Event.query()` answers as a GPU's would. The tensors: measure makes every
tensor through `nsroof.collectors.measure.timing.allocation_device`, which maps "cuda" to "cpu" here.

torch.cuda surface faked (everything the measure code touches, and nothing more): is_available,
device_count, current_device, get_device_name, get_device_properties (name, major/minor, SM count, memory,
L1/shared per SM, L2, a _CUuuid-like uuid whose str() is the bare UUID, as torch's is),
get_device_capability, mem_get_info, synchronize, empty_cache, _sleep, Event(record, query, synchronize,
elapsed_time), and torch.version.cuda. nvidia-smi is a fake executable on PATH that logs how it was asked.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import json
import math
import os
import stat
import sys
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from click.testing import CliRunner

torch = pytest.importorskip("torch")

from nsroof.cli import cli  # noqa: E402
from nsroof.collectors.measure import measure, plan, runner, timing, to_machine  # noqa: E402
from nsroof.collectors.measure.gemm import sweep_shapes  # noqa: E402
from nsroof.collectors.measure.render import render  # noqa: E402
from nsroof.collectors.measure.stream import STREAM_KERNELS  # noqa: E402
from nsroof.roofs.machines import load  # noqa: E402

KIB, MIB = 1024, 1024 * 1024
UUID = "8b1f7a3e-0c55-11ee-be56-0242ac120002"
NAME = "NVIDIA H100 80GB HBM3"  # resolves to the packaged "H100 SXM" datasheet: the efficiency path runs too
# Small caches and little free memory, so the plan the real make_plan derives from them stays tiny:
# ladder 16 KiB … 4·512 KiB = 2 MiB, stream buffers free/8 = 6 MiB (the plan notes the cap).
L1_BYTES, L2_BYTES, FREE_BYTES = 32 * KIB, 512 * KIB, 48 * MIB


class CUuuid:
    """torch's _CUuuid: `bytes`, and str() gives the bare 8-4-4-4-12 UUID (no "GPU-" prefix)."""

    def __init__(self, text: str) -> None:
        self._text = text
        self.bytes = list(bytes.fromhex(text.replace("-", "")))

    def __str__(self) -> str:
        return self._text


@dataclass
class HostDevice:
    cycles_per_s: float = 1.5e9
    device_free: float = 0.0  # perf_counter time at which the stream has run all it holds
    mark: float = 0.0  # host time of the last stream call
    calls: Counter[str] = field(default_factory=Counter)
    smi_log: Path = Path()  # what the fake nvidia-smi was asked

    def _advance(self) -> float:
        now = time.perf_counter()
        # the host time since the last stream call ran real ops: device work, queued behind what was there
        self.device_free = max(self.device_free, self.mark) + (now - self.mark)
        self.mark = now
        return now

    def _wait(self, until: float | None = None) -> None:
        """Block the host until the stream reaches `until` (by default: until it has run all it holds)."""
        self._advance()
        delay = (self.device_free if until is None else until) - time.perf_counter()
        if delay > 0:
            time.sleep(delay)
        self.mark = time.perf_counter()  # the host was blocked: no device work ran from it meanwhile

    def sleep(self, cycles: int) -> None:
        self.calls["_sleep"] += 1
        assert isinstance(cycles, int) and cycles >= 1, cycles  # torch.cuda._sleep takes an int of cycles
        self._advance()
        self.device_free += cycles / self.cycles_per_s

    def synchronize(self, device: Any = None) -> None:
        self.calls["synchronize"] += 1
        self._wait()


class FakeEvent:
    def __init__(self, device: HostDevice, enable_timing: bool = False) -> None:
        self.device = device
        self.enable_timing = enable_timing
        self.at: float | None = None
        device.calls["Event"] += 1

    def record(self, stream: Any = None) -> None:
        self.device.calls["Event.record"] += 1
        self.device._advance()
        self.at = self.device.device_free

    def query(self) -> bool:
        return self.at is None or self.at <= time.perf_counter()

    def synchronize(self) -> None:
        if self.at is not None:
            self.device._wait(self.at)

    def elapsed_time(self, end: FakeEvent) -> float:
        # torch raises for events created without enable_timing, never recorded, or not yet completed
        if not (self.enable_timing and end.enable_timing):
            raise RuntimeError("Both events must be created with argument 'enable_timing=True'")
        if self.at is None or end.at is None:
            raise RuntimeError("Both events must be recorded before calculating elapsed time")
        if end.at > time.perf_counter():
            raise RuntimeError("CUDA error: device not ready (elapsed_time before the end event completed)")
        return (end.at - self.at) * 1e3  # ms, as torch reports it


@pytest.fixture
def fake_cuda(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[HostDevice]:
    device = HostDevice()
    # only fields torch 2.13's _CudaDeviceProperties has (torch/_C/__init__.pyi): a read of one a real GPU
    # lacks could not pass here and fail there
    props = SimpleNamespace(name=NAME, major=9, minor=0, multi_processor_count=132, total_memory=80 << 30,
                            shared_memory_per_multiprocessor=L1_BYTES, L2_cache_size=L2_BYTES,
                            uuid=CUuuid(UUID))

    def counted(name: str, value: Any) -> Any:
        def fn(*args: Any, **kwargs: Any) -> Any:
            device.calls[name] += 1
            return value
        return fn

    cuda = torch.cuda
    monkeypatch.setattr(cuda, "is_available", counted("is_available", True))
    monkeypatch.setattr(cuda, "device_count", counted("device_count", 1))
    monkeypatch.setattr(cuda, "current_device", counted("current_device", 0))
    monkeypatch.setattr(cuda, "get_device_name", counted("get_device_name", NAME))
    monkeypatch.setattr(cuda, "get_device_properties", counted("get_device_properties", props))
    monkeypatch.setattr(cuda, "get_device_capability", counted("get_device_capability", (9, 0)))
    monkeypatch.setattr(cuda, "mem_get_info", counted("mem_get_info", (FREE_BYTES, 80 << 30)))
    monkeypatch.setattr(cuda, "empty_cache", counted("empty_cache", None))
    monkeypatch.setattr(cuda, "synchronize", device.synchronize)
    monkeypatch.setattr(cuda, "_sleep", device.sleep)
    monkeypatch.setattr(cuda, "Event", lambda enable_timing=False, **kw: FakeEvent(device, enable_timing))
    monkeypatch.setattr(torch.version, "cuda", "12.8")

    def on_cpu(where: str) -> str:
        assert where == "cuda", f"a CUDA sweep allocated for {where!r}"
        device.calls["allocation_device"] += 1
        return "cpu"

    monkeypatch.setattr(timing, "allocation_device", on_cpu)

    log = tmp_path / "nvidia-smi.log"
    smi = tmp_path / "bin" / "nvidia-smi"
    smi.parent.mkdir()
    smi.write_text(f"#!{sys.executable}\nimport sys\n"
                   f"open({str(log)!r}, 'a').write(' '.join(sys.argv[1:]) + '\\n')\n"
                   "print('550.54.15, 1980, 2619, 1980, 2619, 700.00, P0, 35')\n")
    smi.chmod(smi.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PATH", f"{smi.parent}{os.pathsep}{os.environ['PATH']}")
    # measure caches its profile: not the user's
    monkeypatch.setenv("NSROOF_CACHE_DIR", str(tmp_path / "cache"))
    device.smi_log = log
    threads = torch.get_num_threads()
    yield device
    torch.set_num_threads(threads)  # `nsroof measure --threads 1` sets them for the whole command


def _small_plan(monkeypatch: pytest.MonkeyPatch, **changes: Any) -> list[plan.Plan]:
    """runner.make_plan becomes the real one with the knobs that hold GPU-sized constants shrunk for a CPU:
    the ladder's bytes per call (1 GiB on a GPU) and, where asked, the shapes and the spin-up. Returns the
    list the plans it builds are appended to."""
    built: list[plan.Plan] = []

    def make(*args: Any, **kwargs: Any) -> plan.Plan:
        built.append(dataclasses.replace(plan.make_plan(*args, **kwargs), ladder_bytes_per_call=4 * MIB,
                                         **changes))
        return built[-1]

    monkeypatch.setattr(runner, "make_plan", make)
    return built


def _check_structure(result: Any, swept: plan.Plan, device: HostDevice) -> None:
    env = result.environment
    assert (env["device"], env["device_name"], env["device_uuid"]) == ("cuda", NAME, f"GPU-{UUID}")
    assert (env["compute_capability"], env["sm_count"], env["cuda_runtime"]) == ("9.0", 132, "12.8")
    assert env["caches"] == {"l1": {"bytes": L1_BYTES, "source": env["caches"]["l1"]["source"]},
                             "l2": {"bytes": L2_BYTES, "source": env["caches"]["l2"]["source"]}}
    assert (env["driver_version"], env["power_limit_w"], env["pstate"]) == ("550.54.15", "700.00", "P0")
    assert f"--id=GPU-{UUID}" in device.smi_log.read_text()  # by UUID, not by torch's index
    assert env["timer"] == "cuda-events+queued-sleep"
    # the CUDA control flow ran on the fake, not around it
    for name in ("is_available", "get_device_properties", "get_device_capability", "mem_get_info",
                 "Event.record", "_sleep", "synchronize", "empty_cache", "allocation_device"):
        assert device.calls[name] > 0, (name, device.calls)

    # every dtype: a measured peak with its source, or an explicit reason
    for dtype in plan.ALL_DTYPES:
        if dtype in result.peak_flop_per_s:
            assert math.isfinite(result.peak_flop_per_s[dtype]) and result.peak_flop_per_s[dtype] > 0
            assert result.sources[f"peak_flop_per_s.{dtype}"].startswith("measured: best of")
            assert "CUDA events median of" in result.sources[f"peak_flop_per_s.{dtype}"]
        else:
            assert result.not_measured[dtype], dtype
            assert result.sources[f"peak_flop_per_s.{dtype}"] == f"not measured: {result.not_measured[dtype]}"
    # every planned GEMM point of every swept dtype is there once: measured with its numbers, or skipped
    # with why
    gemm = [p for p in result.points if p["kind"] == "gemm"]
    for dtype in swept.dtypes:
        mine = [p for p in gemm if p["dtype"] == dtype]
        if not mine:
            assert dtype in result.not_measured  # refused before the sweep (its reason is asserted above)
            continue
        assert [(p["m"], p["n"], p["k"], p["label"]) for p in mine] == [
            (s.m, s.n, s.k, s.label) for s in sweep_shapes(swept)], dtype
        for p in mine:
            assert p["path"] == ("torch._scaled_mm" if dtype == "fp8" else "torch.matmul")
            if p["status"] == "measured":
                assert p["time_s"] > 0 and p["clock"] == "cuda-events+queued-sleep"
                assert p["flop_per_s"] == pytest.approx(2 * p["m"] * p["n"] * p["k"] / p["time_s"])
            else:
                assert p["status"] == "skipped" and p["reason"], p
    # streams: all four kernels over the planned buffers; ladder: every planned working set
    streams = [p for p in result.points if p["kind"] == "stream"]
    assert [p["kernel"] for p in streams] == [k.name for k in STREAM_KERNELS]
    assert all(p["status"] == "measured" and p["buffer_bytes"] == swept.stream_buffer_bytes
               and p["bytes_per_s"] > 0 for p in streams)
    ladder = [p for p in result.points if p["kind"] == "ladder"]
    assert [p["working_set_bytes"] for p in ladder] == list(swept.ladder_sizes)
    assert all(p["status"] == "measured" and p["bytes_per_s"] > 0 for p in ladder)
    assert result.bandwidth_bytes_per_s["dram"] > 0
    assert result.sources["bandwidth_bytes_per_s.dram"].startswith("measured: best streaming kernel")
    assert {lv["level"] for lv in result.derived["ladder_levels"]} == {"l1", "l2", "dram"}
    assert result.derived["efficiency"]["datasheet"] == "spec:H100 SXM"
    assert result.derived["reference_workloads"] and result.derived["ridges_flop_per_byte"]["dram"]


def test_a_cuda_measurement_runs_every_step_on_a_fake_device(fake_cuda: HostDevice,
                                                             monkeypatch: pytest.MonkeyPatch,
                                                             tmp_path: Path) -> None:
    """The runner with a plan of tiny shapes: all five dtypes through their real paths (tf32 at 'high'
    precision, fp8 through torch._scaled_mm, which the CPU build has), including an fp8 shape whose N is
    not a multiple of 16 (skipped with _scaled_mm's reason) and a decode M = 1 (measured: M is free)."""
    shapes = {"squares": (64, 128), "projections": ((128, 40, "odd N 128->40"), (128, 64, "proj 128->64")),
              "m_sweep": (1, 16), "spin_up_s": 0.0,
              # budgets no tiny shape can exceed, however slow a loaded CPU makes a probe: every point runs
              "point_budget_s": 60.0, "gemm_budget_s": 600.0}
    _small_plan(monkeypatch, **shapes)
    before = torch.get_float32_matmul_precision()
    lines: list[str] = []
    # one torch thread: on a shared 2-core machine an OpenMP region stalls whenever one of its threads is
    # descheduled, which only makes this run slower (the "device" is the CPU)
    result = measure("cuda", quick=True, threads=1, progress=lines.append)
    assert torch.get_float32_matmul_precision() == before  # tf32/fp32 sweeps restore it
    swept = result.plan
    assert swept.device == "cuda" and swept.dtypes == plan.ALL_DTYPES  # every dtype by default on CUDA
    # make_plan derived the memory sweeps from the fake's caches and free memory
    assert swept.stream_buffer_bytes == FREE_BYTES // 8
    assert swept.ladder_sizes == (16 * KIB, 32 * KIB, 64 * KIB, 128 * KIB, 256 * KIB, 512 * KIB, 1 * MIB,
                                  2 * MIB)
    assert any("limited to 6 MiB by free memory" in n for n in swept.notes)
    _check_structure(result, swept, fake_cuda)
    assert result.duration_s > 0 and result.environment["spin_up_s"] == 0.0
    # the progress lines format every measured point's figures (an f-string over a None would raise here)
    assert lines[0] == f"measuring {NAME} (cuda, quick sweep)"
    measured = [p for p in result.points if p["status"] == "measured"]
    assert sum(line.startswith(("gemm ", "stream ", "ladder ")) for line in lines) == len(measured)
    # nothing fell to the budget: every dtype measured, and fp8's only skips are the shapes _scaled_mm refuses
    assert set(result.peak_flop_per_s) == set(plan.ALL_DTYPES) and not result.not_measured
    fp8 = [p for p in result.points if p["kind"] == "gemm" and p["dtype"] == "fp8"]
    assert ({p["reason"] for p in fp8 if p["status"] == "skipped"}
            == {"torch._scaled_mm needs K and N divisible by 16"})
    assert {p["label"] for p in fp8 if p["status"] == "skipped"} == {"odd N 128->40"}
    assert any(p["status"] == "measured" and p["m"] == 1 for p in fp8)
    others = [p for p in result.points if p["kind"] == "gemm" and p["dtype"] != "fp8"]
    assert all(p["status"] == "measured" for p in others)  # torch.matmul takes any shape

    text = render(result)
    assert text.startswith(f"device   {NAME}  CC 9.0  132 SMs  80 GiB  driver 550.54.15  CUDA 12.8")
    assert "timing   cuda-events+queued-sleep" in text and "Against the datasheet (spec:H100 SXM)" in text

    machine = to_machine(result)
    assert (machine.kind, machine.source, machine.name) == ("gpu", "measured", NAME)
    # fp64 on a GH100 is the FP64 tensor roof too, where the machine table has that key (runner.peak_keys)
    assert set(machine.peak_flop_per_s) == {k for d in plan.ALL_DTYPES
                                            for k in runner.peak_keys(d, result.environment)}
    assert set(machine.bandwidth_bytes_per_s) == {"l1", "l2", "dram"}
    machine.save(tmp_path / "h100.json")
    again = load(tmp_path / "h100.json")
    assert again.kind == "gpu" and again.environment["device_uuid"] == f"GPU-{UUID}"
    assert len(again.points) == len(result.points)
    json.loads((tmp_path / "h100.json").read_text())  # strict JSON: no NaN left in it


def test_nsroof_measure_device_cuda_quick_on_a_fake_device(fake_cuda: HostDevice,
                                                           monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                                                           data_dir: Path, repo: Path) -> None:
    """The command a user types, with the quick plan as make_plan derives it for the fake device (1 s bf16
    spin-up, squares to 8192, the Llama projections) but 4 MiB ladder calls, 256² spin-up products (a
    4096² bf16 product takes minutes on a CPU without AVX512-BF16) and a 2 s GEMM budget: the points that
    do not fit are recorded as skipped. Then the profile goes through `nsroof machines` and `nsroof
    analyze` as a measured GPU profile."""
    built = _small_plan(monkeypatch, spin_up_size=256)
    out = tmp_path / "machine.json"
    res = CliRunner().invoke(cli, ["measure", "--device", "cuda", "--quick", "--budget", "2", "--threads",
                                   "1", "-o", str(out), "--csv", str(tmp_path / "points.csv")])
    assert res.exit_code == 0, res.output
    assert f"device   {NAME}  CC 9.0" in res.stdout
    # commands.measure.cache_path: one per device name
    cached = tmp_path / "cache" / "cuda-nvidia-h100-80gb-hbm3.json"
    assert f"cached as {cached}" in res.stdout and cached.is_file()
    assert f"wrote {out}" in res.stdout and "points)" in res.stdout

    raw = json.loads(out.read_text())
    assert raw == json.loads(cached.read_text())
    env = raw["environment"]
    assert env["spin_up_s"] >= 1.0  # the CUDA spin-up ran (bf16 products, a synchronize after each)
    [swept] = built
    # the quick GPU plan (90 s GEMM budget), which --budget 2 replaced for this run
    assert (swept.quick, swept.reps, swept.warmup, swept.gemm_budget_s) == (True, 7, 3, 90.0)
    assert env["plan"]["gemm_budget_s"] == 2.0
    result = runner.MeasureResult(plan=swept, environment=env, points=raw["points"],
                                  peak_flop_per_s=raw["peak_flop_per_s"],
                                  bandwidth_bytes_per_s=raw["bandwidth_bytes_per_s"],
                                  sources=raw["sources"], not_measured=env["not_measured"],
                                  derived=env["derived"])
    _check_structure(result, swept, fake_cuda)
    budget = [p for p in raw["points"] if p["kind"] == "gemm" and p["status"] == "skipped"]
    assert budget and all(p["reason"] for p in budget)  # 8192³ on a CPU in 2 s: most of the sweep is skipped

    import pandas as pd

    assert len(pd.read_csv(tmp_path / "points.csv")) == len(raw["points"])  # the --csv of `make gpu-check`

    # what `make gpu-check` writes into docs/measurements.md from this profile
    spec = importlib.util.spec_from_file_location("gpu_check_report",
                                                  repo / "scripts" / "gpu_check_report.py")
    assert spec is not None and spec.loader is not None
    report_script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(report_script)
    entry = report_script._machine_lines(out)
    assert entry[0].startswith(f"- device: {NAME} (CC 9.0, 132 SMs, uuid GPU-{UUID}), "
                               "driver 550.54.15, CUDA 12.8")
    assert any(line.startswith("- bandwidth dram: ") for line in entry)

    machine = load(out)
    assert machine.kind == "gpu" and machine.label == "measured:machine.json"
    res = CliRunner().invoke(cli, ["machines", "--machine", str(out)])
    assert res.exit_code == 0, res.output
    assert "measured:machine.json" in res.output
    report = tmp_path / "r.parquet"
    export = data_dir / "ncu" / "details_new.csv"  # the project's own small GPU export
    res = CliRunner().invoke(cli, ["analyze", str(export), "--machine", str(out), "-o", str(report)])
    assert res.exit_code == 0, res.output
    frame = pd.read_parquet(report)
    # every row's roofs come from the profile (the compute roof only where the run measured the row's dtype
    # within its 2 s budget on this shared CPU: "compute=unknown; memory=measured:machine.json#…" otherwise)
    assert (len(frame) == 6
            and frame["ceiling_source"].str.contains("measured:machine.json", regex=False).all())
