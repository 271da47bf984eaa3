"""A torch.profiler trace recorded without ProfilerActivity.CUDA: its ops and their `cudaLaunchKernel` calls,
no kernel event. tests/data/traces/launches_without_kernels.json (written by hand in kineto's layout: an
aten::linear whose addmm launches one kernel, an aten::relu launching one, an A100 in deviceProperties).
The GPU activity was not recorded: one warning says so, each launch is a kernel row of unknown duration
linked to its op, and no rate is computed over a 0 s or a CPU time."""

from __future__ import annotations

import json
import math
from pathlib import Path

from nsroof import importers
from nsroof.importers.trace import unrecorded
from nsroof.pipeline import analyze

FACT = ("the trace has 2 kernel launch(es) (cudaLaunchKernel ×2) but no GPU kernel events: the GPU activity "
        "was not recorded; record with activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]")


def test_launches_are_kernels_of_unknown_duration(data_dir: Path) -> None:
    kernels, facts = importers.read(data_dir / "traces" / "launches_without_kernels.json")
    assert facts.warnings == [FACT + ": every kernel's duration is NaN"]
    assert list(kernels["kind"]) == ["kernel", "kernel"]
    assert list(kernels["op"]) == ["aten::addmm", "aten::relu"]  # by the launches' External id
    assert list(kernels["function"]) == ["cudaLaunchKernel: kernel not recorded"] * 2
    assert kernels["gpu__time_duration.sum"].isna().all()
    assert list(kernels["duration_missing"]) == [FACT, FACT]
    assert set(kernels["device"]) == {"NVIDIA A100-SXM4-40GB"}


def test_the_report_says_what_is_missing_and_computes_no_rate(data_dir: Path) -> None:
    report = analyze([data_dir / "traces" / "launches_without_kernels.json"])
    rows, ops = report.frame, report.ops
    assert ops is not None
    for frame in (rows, ops):
        assert frame["duration_s"].isna().all()
        assert frame["achieved_flop_per_s"].isna().all() and frame["roof_fraction"].isna().all()
        assert (frame["missing"] == FACT).all()
    # the ops keep their formulas' costs: addmm (8×16)·(16×32) = 2·8·16·32 + 8·32 = 8,448 FLOP
    assert ops.set_index("op").loc["aten::addmm", "flops"] == 8448
    assert report.warnings and report.warnings[0].startswith(f"launches_without_kernels.json: {FACT}")


def test_launches_inside_a_stream_capture_run_nothing(tmp_path: Path) -> None:
    def runtime(name: str, ts: float, corr: int) -> dict[str, object]:
        return {"ph": "X", "cat": "cuda_runtime", "name": name, "pid": 1, "tid": 1, "ts": ts, "dur": 1.0,
                "args": {"correlation": corr}}

    events = [runtime("cudaStreamBeginCapture", 1.0, 1), runtime("cudaLaunchKernel", 2.0, 2),
              runtime("cudaStreamEndCapture", 3.0, 3), runtime("cudaGraphLaunch", 4.0, 4),
              runtime("cudaMemcpyAsync", 5.0, 5)]
    path = tmp_path / "t.json"
    path.write_text(json.dumps({"traceEvents": events}))
    from nsroof.importers.trace.load import load

    launches = unrecorded.kernel_launches(load(path).launches)
    # the launch during the capture adds a graph node, the copy launches no kernel: the graph launch remains
    assert [e.name for e in launches] == ["cudaGraphLaunch"]
    kernels, facts = importers.read(path)
    assert len(kernels) == 1 and math.isnan(kernels["gpu__time_duration.sum"].iloc[0])
    assert "1 kernel launch(es) (cudaGraphLaunch ×1)" in facts.warnings[0]
