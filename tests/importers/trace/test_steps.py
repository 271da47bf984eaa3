"""Step time accounted (nsroof.importers.trace.steps): a synthetic trace whose step waits 40 ms outside any op
is reported as such; GPU busy counts overlapping streams once; steps from marks when no range names them."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from nsroof import importers
from nsroof.pipeline import analyze
from nsroof.report.breakdown import step_lines, step_table


def _x(cat: str, name: str, ts: float, dur: float, pid: Any = 1, tid: Any = 1, **args: Any) -> dict[str, Any]:
    return {"ph": "X", "cat": cat, "name": name, "pid": pid, "tid": tid, "ts": ts, "dur": dur, "args": args}


def _waiting_step() -> dict[str, Any]:
    """ProfilerStep#1 over [0, 100 ms): ops over [0, 30) and [70, 100) ms, nothing in between (a 40 ms wait
    for the input, as a DataLoader's worker would leave it), and the first op's two kernels on two streams
    overlapping: [1, 11) and [6, 16) ms."""
    ms = 1000.0  # the trace's clock is µs
    return {"schemaVersion": 1, "deviceProperties": [{"id": 0, "name": "NVIDIA A100-SXM4-40GB",
                                                      "computeMajor": 8, "computeMinor": 0}],
            "traceEvents": [
                _x("user_annotation", "ProfilerStep#1", 0.0, 100 * ms),
                _x("cpu_op", "aten::mm", 0.0, 20 * ms, **{"External id": 1}),
                # nested in aten::mm's time and parallel on another thread: counted once
                _x("cpu_op", "aten::mm", 5 * ms, 10 * ms, tid=2, **{"External id": 2}),
                _x("cpu_op", "aten::relu", 20 * ms, 10 * ms, **{"External id": 3}),
                # the input wait: 30 -> 70 ms, no op
                _x("cpu_op", "aten::add", 70 * ms, 30 * ms, **{"External id": 4}),
                _x("cuda_runtime", "cudaLaunchKernel", 1 * ms, 0.01 * ms, correlation=10,
                   **{"External id": 1}),
                _x("cuda_runtime", "cudaLaunchKernel", 2 * ms, 0.01 * ms, correlation=11,
                   **{"External id": 1}),
                _x("kernel", "ampere_sgemm_64x64_nn", 1 * ms, 10 * ms, pid=0, tid=7, device=0, stream=7,
                   correlation=10, **{"External id": 1}),
                _x("kernel", "ampere_sgemm_64x64_nn", 6 * ms, 10 * ms, pid=0, tid=8, device=0, stream=8,
                   correlation=11, **{"External id": 1}),
            ]}


def test_a_40_ms_wait_outside_ops_is_reported_as_the_share_of_the_step_no_op_covers(tmp_path: Path) -> None:
    path = tmp_path / "trace.json"
    path.write_text(json.dumps(_waiting_step()))
    _, facts = importers.read(path)
    (step,) = facts.extra["step_time"]
    assert step["step"] == "1"
    assert step["wall_s"] == pytest.approx(0.100)
    # ops: [0, 30) ∪ [70, 100) ms = 60 ms (the thread-2 op inside [0, 20) adds nothing)
    assert step["op_s"] == pytest.approx(0.060)
    assert step["outside_ops_s"] == pytest.approx(0.040)
    assert step["outside_ops_share"] == pytest.approx(0.4)  # 40 / 100
    # one gap, 40 ms >= 1 ms: a wait, none of it launch overhead
    assert step["waits_s"] == pytest.approx(0.040)
    assert step["between_ops_s"] == pytest.approx(0.0, abs=1e-12)
    assert step["longest_gap_s"] == pytest.approx(0.040)
    assert step["dataloader_s"] == 0.0
    # kernels: 10 + 10 = 20 ms summed; [1, 11) ∪ [6, 16) = 15 ms busy; idle 100 - 15 = 85 ms
    assert step["kernel_s"] == pytest.approx(0.020)
    assert step["gpu_busy_s"] == pytest.approx(0.015)
    assert step["gpu_idle_s"] == pytest.approx(0.085)


def test_the_summary_and_the_step_table_show_it(tmp_path: Path) -> None:
    path = tmp_path / "trace.json"
    path.write_text(json.dumps(_waiting_step()))
    report = analyze([path])
    table = step_table(report.metadata)
    assert table["source"].tolist() == ["trace.json"]
    assert table["outside_ops_s"].tolist() == pytest.approx([0.040])
    text = "\n".join(step_lines(report.metadata))
    assert "   40 ms  40%" in text  # outside ops: 40 ms, 40% of the step
    # 40 ms of 100: all of it one wait; the GPU idle 85 of its 100 ms
    assert ("over 1 step(s): 40% of the wall time no op running (40% in waits of 1 ms or more); the GPU idle "
            "85% of its stretch") in text


def test_short_gaps_are_between_ops_and_dataloader_ranges_are_timed(tmp_path: Path) -> None:
    """Ops every 1 ms with 0.2 ms between them, inside a DataLoader range of 5 ms: 5 gaps of 0.2 ms are
    launch overhead (between ops), none a wait."""
    events = [_x("user_annotation", "ProfilerStep#3", 0.0, 5000.0),
              _x("user_annotation", "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__", 0.0,
                 2000.0)]
    events += [_x("cpu_op", "aten::add", i * 1000.0, 800.0, **{"External id": i + 1}) for i in range(5)]
    path = tmp_path / "cpu.json"
    path.write_text(json.dumps({"schemaVersion": 1, "traceEvents": events}))
    (step,) = importers.read(path)[1].extra["step_time"]
    assert step["step"] == "3"
    assert step["op_s"] == pytest.approx(0.004)  # 5 × 0.8 ms
    assert step["between_ops_s"] == pytest.approx(0.001)  # 5 × 0.2 ms gaps, each under 1 ms
    assert step["waits_s"] == 0.0
    assert step["dataloader_s"] == pytest.approx(0.002)
    assert step["gpu_busy_s"] is None  # a CPU run: no GPU to be busy or idle


def test_no_step_marked_gives_no_step_table(tmp_path: Path) -> None:
    path = tmp_path / "plain.json"
    path.write_text(json.dumps({"schemaVersion": 1,
                                "traceEvents": [_x("cpu_op", "aten::add", 0.0, 10.0)]}))
    assert "step_time" not in importers.read(path)[1].extra


def test_steps_from_marks_are_those_the_report_keeps(tmp_path: Path) -> None:
    """Optimizer-step marks at 10, 20, 30 ms (nsroof.profile's `nsroof::step#optimizer#N`), --warmup 1
    --steps 1: step 1 [0, 10) is warm-up, step 2 [10, 20) is the report's, step 3 is past --steps."""
    ms = 1000.0
    events = [_x("cpu_op", "aten::mm", i * ms, 8 * ms, **{"External id": i + 1}) for i in (0, 10, 20)]
    events += [_x("user_annotation", f"nsroof::step#optimizer#{n}", n * 10 * ms, 0.0) for n in (1, 2, 3)]
    path = tmp_path / "marked.json"
    path.write_text(json.dumps({"schemaVersion": 1, "nsroof": {"steps": {"warmup": 1, "steps": 1}},
                                "traceEvents": events}))
    steps = importers.read(path)[1].extra["step_time"]
    assert [s["step"] for s in steps] == ["2"]
    assert steps[0]["wall_s"] == pytest.approx(0.010)  # 10 -> 20 ms
    assert steps[0]["op_s"] == pytest.approx(0.008)  # the op at 10 ms, 8 ms long


def test_a_step_owns_the_gpu_work_it_launched_however_late_it_ran(tmp_path: Path) -> None:
    """A graph replay launched at 1 ms of a 2 ms step runs 5 -> 9 ms, after the step's CPU range: its 4 ms are
    the step's; the GPU's stretch of the step is 0 -> 9 ms, idle 9 - 4 = 5 ms."""
    events = [_x("user_annotation", "ProfilerStep#1", 0.0, 2000.0),
              _x("cpu_op", "aten::mm", 0.0, 2000.0, **{"External id": 1}),
              _x("cuda_runtime", "cudaGraphLaunch", 1000.0, 10.0, correlation=5, **{"External id": 1}),
              _x("kernel", "sm90_gemm", 5000.0, 4000.0, pid=0, tid=7, device=0, stream=7, correlation=5)]
    path = tmp_path / "lag.json"
    path.write_text(json.dumps({"schemaVersion": 1, "traceEvents": events}))
    (step,) = importers.read(path)[1].extra["step_time"]
    assert step["kernel_s"] == pytest.approx(0.004)
    assert step["gpu_busy_s"] == pytest.approx(0.004)
    assert step["gpu_idle_s"] == pytest.approx(0.005)
