"""The benchmarks' generated inputs are what they claim: the scaled trace is N shifted copies (unique
correlation and flow ids, steps renumbered, later timestamps), the scaled export N copies under new
kernel IDs that nsroof reads as N times the kernels. (Timings are never checked here: `make bench`.)"""

from __future__ import annotations

import gzip
import json
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from tests._paths import REPO

sys.path.insert(0, str(REPO / "benchmarks"))

import bench_analyze  # noqa: E402
import bench_trace  # noqa: E402


def _tiny_trace() -> dict[str, Any]:
    """Two profiler steps, each one op launching one kernel (runtime call, flow start and end)."""
    events: list[dict[str, Any]] = [{"ph": "M", "name": "process_name", "pid": 1, "tid": 0, "ts": 0,
                                     "args": {"name": "python"}}]
    for step, t in ((7, 100), (8, 200)):
        corr = step * 10
        events += [
            {"ph": "X", "cat": "user_annotation", "name": f"ProfilerStep#{step}", "pid": 1, "tid": 1, "ts": t,
             "dur": 90, "args": {"External id": corr - 1}},
            {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": t + 5, "dur": 20,
             "args": {"External id": corr - 2, "Profiler Event Index": step, "Sequence number": step}},
            {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": t + 10,
             "dur": 5, "args": {"External id": corr - 2, "correlation": corr}},
            {"ph": "s", "cat": "ac2g", "name": "ac2g", "id": corr, "pid": 1, "tid": 1, "ts": t + 10},
            {"ph": "f", "cat": "ac2g", "name": "ac2g", "id": corr, "pid": 0, "tid": 7, "ts": t + 30,
             "bp": "e"},
            {"ph": "X", "cat": "kernel", "name": "gemm", "pid": 0, "tid": 7, "ts": t + 30, "dur": 40,
             "args": {"External id": corr - 2, "correlation": corr, "device": 0, "stream": 7}},
        ]
    return {"schemaVersion": 1, "distributedInfo": {"rank": 0}, "traceEvents": events}


def test_scaled_trace_is_shifted_copies(tmp_path: Path) -> None:
    src = tmp_path / "tiny.json.gz"
    with gzip.open(src, "wt", encoding="utf-8") as fh:
        json.dump(_tiny_trace(), fh)
    facts = bench_trace.scale_trace(src, tmp_path / "scaled.json", 3)
    events = json.loads((tmp_path / "scaled.json").read_text())["traceEvents"]
    assert facts["kernels"] == 6 and facts["rank"] == 0
    assert sum(e["ph"] == "M" for e in events) == 1  # metadata once
    kernels = [e for e in events if e.get("cat") == "kernel"]
    assert len(kernels) == 6
    # every copy's launches keep their own correlation, flow id and op id: none shared between copies
    assert max(Counter(e["args"]["correlation"] for e in kernels).values()) == 1
    assert max(Counter((e["id"], e["ph"]) for e in events if e["ph"] in "sf").values()) == 1
    assert max(Counter(e["args"]["Profiler Event Index"] for e in events
                       if e.get("cat") == "cpu_op").values()) == 1
    # steps 7, 8 then 9, 10 then 11, 12; the span is 100 .. 290 (191 µs): copy k starts 191·k later
    assert [e["name"] for e in events if e.get("cat") == "user_annotation"] == [
        f"ProfilerStep#{n}" for n in range(7, 13)]
    assert [e["ts"] for e in kernels] == [130, 230, 321, 421, 512, 612]
    # a kernel and its runtime call still share a correlation id within each copy
    runtime = {e["args"]["correlation"] for e in events if e.get("cat") == "cuda_runtime"}
    assert runtime == {e["args"]["correlation"] for e in kernels}


def test_a_trace_without_metadata_events_scales_to_valid_json(tmp_path: Path) -> None:
    trace = _tiny_trace()
    trace["traceEvents"] = [e for e in trace["traceEvents"] if e["ph"] != "M"]
    del trace["distributedInfo"]  # a single-process run: rank 0
    src = tmp_path / "bare.json.gz"
    with gzip.open(src, "wt", encoding="utf-8") as fh:
        json.dump(trace, fh)
    facts = bench_trace.scale_trace(src, tmp_path / "scaled.json", 2)
    events = json.loads((tmp_path / "scaled.json").read_text())["traceEvents"]  # no leading comma
    assert facts["rank"] == 0 and facts["kernels"] == 4
    assert sum(e.get("cat") == "kernel" for e in events) == 4


def test_scaled_export_reads_as_copies_of_its_kernels(data_dir: Path, tmp_path: Path) -> None:
    import nsroof.importers

    src = data_dir / "ncu" / "details_new.csv"
    one, _ = nsroof.importers.read(src)
    facts = bench_analyze.scale_export(src, tmp_path / "scaled.csv", 0)  # 0 MB: one copy at least
    assert facts["copies"] == 1
    facts = bench_analyze.scale_export(src, tmp_path / "scaled.csv", int(3.5 * src.stat().st_size / 1e6) or 1)
    kernels, _ = nsroof.importers.read(tmp_path / "scaled.csv")
    assert facts["copies"] >= 1
    assert len(kernels) == facts["copies"] * len(one) == facts["kernels"]
    assert kernels["kernel_id"].is_unique


@pytest.mark.parametrize("value, at_least, expected", [(1.2, True, "PASS"), (0.8, True, "FAIL"),
                                                       (0.8, False, "PASS"), (None, True, "SKIP")])
def test_target_status(value: float | None, at_least: bool, expected: str, tmp_path: Path,
                       monkeypatch: pytest.MonkeyPatch) -> None:
    import _common

    sink = tmp_path / "targets.jsonl"
    monkeypatch.setenv(_common.RESULTS_ENV, str(sink))
    assert _common.target("work", value, 1.0, at_least=at_least, what="ratio") == (expected != "FAIL")
    row = json.loads(sink.read_text())
    assert row["status"] == expected
    assert expected in _common.table([row])


def test_graph_bench_traces_replay_the_bs32_graph_whole(tmp_path: Path) -> None:
    import bench_graphs

    from nsroof import importers

    bench_graphs.write_capture(tmp_path / "capture.json", layers=3)
    bench_graphs.write_replay(tmp_path / "replay.json", launches=2, layers=3)
    frame, facts = importers.read(tmp_path / "replay.json", captures=[tmp_path / "capture.json"])
    kernels = frame[frame["kind"] == "kernel"]
    assert len(kernels) == 2 * 3 * 2  # launches × layers × (GEMM, ReLU)
    assert facts.extra["graphs"]["mapped"] == 12 and facts.extra["graphs"]["ambiguous_launches"] == 0
    # the replay's grids are those of the bs-32 graph (captured first of four): its shapes, not bs 1's
    mm = kernels[kernels["op"] == "aten::mm"]
    assert set(mm["input_shapes"]) == {"[[32, 4096], [4096, 4096]]"} and mm["op_id"].nunique() == 6
