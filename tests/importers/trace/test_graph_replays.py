"""Graph replays carry the full cost of the ops they replay (nsroof.importers.trace.graphs): a capture trace
and a replay trace written here (ROCm-style: the capture's launches name their kernel, grid and block), one
captured graph replayed N times, piecewise graphs that match equally, graphs of the same kernels at two
sizes, and a replay without its capture."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from nsroof import importers
from nsroof.pipeline import analyze
from nsroof.report.summary import render

GEMM = "Cijk_Alik_Bljk_BBS_BH_MT64x64"
RELU = "void at::native::vectorized_elementwise_kernel<4, relu>"


@dataclass
class Trace:
    """A kineto trace under construction: events on thread 1 of process 1, kernels on stream 0."""

    events: list[dict[str, Any]] = field(default_factory=list)
    corr: int = 0

    def add(self, cat: str, name: str, ts: float, dur: float, **args: Any) -> None:
        self.events.append({"ph": "X", "cat": cat, "name": name, "pid": 1, "tid": 1, "ts": ts, "dur": dur,
                            "args": args})

    def runtime(self, name: str, ts: float, **args: Any) -> int:
        self.corr += 1
        self.add("cuda_runtime", name, ts, 1, correlation=self.corr, **args)
        return self.corr

    def write(self, path: Path) -> Path:
        path.write_text(json.dumps({"traceEvents": self.events,
                                    "deviceProperties": [{"id": 0, "name": "AMD Instinct MI300X"}]}))
        return path


@dataclass(frozen=True)
class Layer:
    """One captured graph: a GEMM m×k @ k×n then a ReLU of its output, at the given kernel grids."""

    m: int
    k: int
    n: int
    grids: tuple[int, int] = (4, 8)
    annotation: str = ""


def capture(layers: list[Layer], path: Path) -> Path:
    """A capture trace: each layer one stream capture of aten::mm and aten::relu (each op's launch naming
    its kernel, grid and block, as ROCm records them), the layer's annotation around it."""
    t, ts = Trace(), 100.0
    for i, layer in enumerate(layers):
        if layer.annotation:
            t.add("user_annotation", layer.annotation, ts, 90)
        t.runtime("hipStreamBeginCapture", ts + 1)
        for j, (op, kernel, dims, grid) in enumerate((
                ("aten::mm", GEMM, [[layer.m, layer.k], [layer.k, layer.n]], layer.grids[0]),
                ("aten::relu", RELU, [[layer.m, layer.n]], layer.grids[1]))):
            ext = 10 * i + j + 1
            t.add("cpu_op", op, ts + 10 + 20 * j, 15, **{"External id": ext, "Input Dims": dims,
                                                          "Input type": ["c10::BFloat16"] * len(dims)})
            t.runtime("hipLaunchKernel", ts + 12 + 20 * j, kernel=kernel, grid=[grid, 1, 1],
                      block=[256, 1, 1], **{"External id": ext})
        t.runtime("hipStreamEndCapture", ts + 60)
        ts += 100
    return t.write(path)


def replay(launches: list[tuple[int, int]], path: Path, step: str = "decode_step",
           graph_id: int | None = None) -> Path:
    """A replay trace: one hipGraphLaunch per (GEMM grid, ReLU grid), its GEMM and ReLU kernels with the
    launch's correlation (and CUPTI's graph and node ids when `graph_id`), all under one step annotation."""
    t = Trace()
    t.add("user_annotation", step, 0, 100 * len(launches) + 100)
    for r, grids in enumerate(launches):
        ts = 10 + 100 * r
        corr = t.runtime("hipGraphLaunch", ts)
        for j, (kernel, grid) in enumerate(zip((GEMM, RELU), grids, strict=True)):
            t.events.append({"ph": "X", "cat": "kernel", "name": kernel, "pid": 0, "tid": 0,
                             "ts": ts + 5 + 20 * j, "dur": 10 + j, "args": {
                                 "device": 0, "stream": 0, "correlation": corr, "grid": [grid, 1, 1],
                                 "block": [256, 1, 1]} | ({"graph id": graph_id, "graph node id": j + 1}
                                                          if graph_id is not None else {})})
    return t.write(path)


def _text(report: Any) -> str:
    """The summary, its wrapped lines joined."""
    return " ".join(render(report, width=200).split())


def _report_kernels(report: Any) -> pd.DataFrame:
    frame = report.frame
    return frame[frame["kind"] == "kernel"].drop_duplicates("kernel_id").reset_index(drop=True)


def test_each_replay_of_one_captured_graph_carries_the_full_flops(tmp_path: Path) -> None:
    n = 4
    cap = capture([Layer(32, 64, 128)], tmp_path / "capture.json")
    rep = replay([(4, 8)] * n, tmp_path / "replay.json")
    report = analyze([rep], captures=[cap])
    k = _report_kernels(report)
    gemm, relu = k[k["kernel_name"] == GEMM], k[k["kernel_name"] == RELU]
    assert len(gemm) == len(relu) == n
    # every replay's GEMM: 2·m·n·k = 2·32·128·64 = 524,288 FLOP, the whole op (before: ×0.25, 1 of 4 kernels)
    assert list(gemm["flops"]) == [524_288.0] * n
    # the ReLU: one comparison per output element, 32·128 = 4,096 (before: ×0.25 as well)
    assert list(relu["flops"]) == [4_096.0] * n
    assert not k["flops_source"].str.contains("×|kernels of one op").any()
    # the op-level view: one aten::mm call per replay, one kernel each, its whole cost
    ops = report.ops
    mm = ops[ops["op"] == "aten::mm"].drop_duplicates("kernel_id")
    assert len(mm) == n and list(mm["launches"]) == [1] * n and list(mm["flops"]) == [524_288.0] * n


def test_each_replay_has_its_own_copies_of_the_captured_ops(tmp_path: Path) -> None:
    cap = capture([Layer(32, 64, 128, annotation="capture_bs32")], tmp_path / "capture.json")
    frame, facts = importers.read(replay([(4, 8)] * 3, tmp_path / "replay.json"), captures=[cap])
    kernels = frame[frame["kind"] == "kernel"]
    assert kernels["op_id"].nunique() == 6  # 3 replays × (mm, relu)
    ops = facts.ops.set_index("op_id")
    copies = ops.loc[kernels["op_id"].astype(int)]
    assert set(copies["recorded_in"]) == {"capture.json"}
    mm = kernels["op"].eq("aten::mm").to_numpy()
    assert list(copies["input_shapes"][mm]) == [[[32, 64], [64, 128]]] * 3
    # a copy's path: the replay's annotation, then the capture's (as its kernels')
    assert set(copies["nvtx_path"]) == {"decode_step/capture_bs32"} == set(kernels["nvtx_path"])
    assert facts.extra["graphs"]["mapped"] == 6 and facts.extra["graphs"]["tied_launches"] == 0


def test_equal_piecewise_graphs_are_taken_in_capture_order_never_split(tmp_path: Path) -> None:
    # three layers captured one graph each, the same ops, shapes and kernels: every replay matches all three
    layers = [Layer(32, 64, 128, annotation=f"layer_{i}") for i in range(3)]
    cap = capture(layers, tmp_path / "capture.json")
    rep = replay([(4, 8)] * 6, tmp_path / "replay.json")  # two steps of three layers
    frame, facts = importers.read(rep, captures=[cap])
    kernels = frame[frame["kernel_name"] == GEMM]
    # the k-th launch takes the k-th layer captured, cycling
    assert [p.split("/")[-1] for p in kernels["nvtx_path"]] == ["layer_0", "layer_1", "layer_2"] * 2
    assert facts.extra["graphs"]["tied_launches"] == 6 and facts.extra["graphs"]["ambiguous_launches"] == 0
    report = analyze([rep], captures=[cap])
    # 2·32·128·64 = 524,288 FLOP on each (before: 1/6 of it, "×0.1667 (1 of 6 kernels …)")
    assert list(_report_kernels(report).query("kernel_name == @GEMM")["flops"]) == [524_288.0] * 6
    text = _text(report)
    assert "6 launch(es) matched several captured graphs equally, 0 of them ambiguous" in text


def test_replays_of_one_graph_id_take_one_of_the_equal_graphs(tmp_path: Path) -> None:
    # CUPTI's graph id says the three launches replay one graph: one window for all, not one each
    cap = capture([Layer(32, 64, 128, annotation=f"layer_{i}") for i in range(3)], tmp_path / "capture.json")
    frame, facts = importers.read(replay([(4, 8)] * 3, tmp_path / "replay.json", graph_id=7), captures=[cap])
    kernels = frame[frame["kernel_name"] == GEMM]
    assert [p.split("/")[-1] for p in kernels["nvtx_path"]] == ["layer_0"] * 3
    assert kernels["op_id"].nunique() == 3  # still a copy of the ops per replay
    assert facts.extra["graphs"]["tied_launches"] == 3


def test_grid_and_block_pick_the_graph_captured_at_the_replayed_size(tmp_path: Path) -> None:
    # the same kernels captured at two batch sizes, the smaller last: the replay's grids are those of bs 32
    cap = capture([Layer(32, 64, 128, grids=(4, 8), annotation="bs32"),
                   Layer(8, 64, 128, grids=(1, 2), annotation="bs8")], tmp_path / "capture.json")
    frame, facts = importers.read(replay([(4, 8)], tmp_path / "replay.json"), captures=[cap])
    mm = frame[frame["kernel_name"] == GEMM]
    assert list(mm["input_shapes"]) == ["[[32, 64], [64, 128]]"]
    assert list(mm["nvtx_path"]) == ["decode_step/bs32"]
    assert facts.extra["graphs"]["tied_launches"] == 0


def test_windows_of_other_shapes_behind_the_same_kernels_are_ambiguous(tmp_path: Path) -> None:
    # same kernels, same grids, other shapes: nothing in the replay tells them apart
    cap = capture([Layer(32, 64, 128, annotation="first"), Layer(32, 64, 256, annotation="second")],
                  tmp_path / "capture.json")
    rep = replay([(4, 8)], tmp_path / "replay.json")
    report = analyze([rep], captures=[cap])
    gemm = _report_kernels(report).query("kernel_name == @GEMM")
    # the latest captured, whole: 2·32·256·64 = 1,048,576 FLOP
    assert list(gemm["flops"]) == [1_048_576.0]
    assert any("1 graph launch(es) match several captured graphs equally whose ops or shapes differ" in w
               for w in report.warnings)
    assert "1 launch(es) matched several captured graphs equally, 1 of them ambiguous" in _text(report)


def test_a_replay_without_its_capture_is_timed_and_names_the_capture_to_pass(tmp_path: Path) -> None:
    report = analyze([replay([(4, 8)] * 2, tmp_path / "replay.json")])
    k = _report_kernels(report)
    assert len(k) == 4 and k["duration_s"].notna().all()
    assert set(k["op"]) == {"hipGraphLaunch"} and set(k["nvtx_path"]) == {"decode_step"}
    assert set(k["missing"].str.contains("torch traces take --capture FILE")) == {True}
    text = _text(report)
    assert "largest uncovered: graph replay, op recorded at capture: torch traces take --capture FILE" in text
    assert "graph replays: 2 launch(es), 4 kernels with the launch as their op: no capture trace" in text


@pytest.mark.parametrize("n", [1, 3])
def test_op_level_rows_sum_to_the_kernel_rows(tmp_path: Path, n: int) -> None:
    cap = capture([Layer(32, 64, 128)], tmp_path / "capture.json")
    report = analyze([replay([(4, 8)] * n, tmp_path / "replay.json")], captures=[cap])
    k = _report_kernels(report)
    ops = report.ops.drop_duplicates("kernel_id")
    assert ops["flops"].sum() == pytest.approx(k["flops"].sum())
    assert ops["flops"].sum() == n * (524_288 + 4_096)  # n replays × (GEMM + ReLU), each whole


def cuda_capture(layers: list[Layer], path: Path) -> Path:
    """A CUDA capture trace (launches name no kernel, grid or block): before each capture, one eager
    warm-up run of the same ops, whose kernels the trace records with their grids."""
    t, ts = Trace(), 100.0
    for i, layer in enumerate(layers):
        t.add("user_annotation", layer.annotation, ts, 190)
        ops = (("aten::mm", GEMM, [[layer.m, layer.k], [layer.k, layer.n]], layer.grids[0]),
               ("aten::relu", RELU, [[layer.m, layer.n]], layer.grids[1]))
        for phase in ("warmup", "capture"):
            base = ts + (0 if phase == "warmup" else 100)
            if phase == "capture":
                t.runtime("cudaStreamBeginCapture", base + 1)
            for j, (op, kernel, dims, grid) in enumerate(ops):
                ext = 100 * i + 10 * (phase == "capture") + j + 1
                t.add("cpu_op", op, base + 10 + 20 * j, 15, **{"External id": ext, "Input Dims": dims,
                                                                "Input type": ["float"] * len(dims)})
                corr = t.runtime("cudaLaunchKernel", base + 12 + 20 * j, **{"External id": ext})
                if phase == "warmup":
                    t.events.append({"ph": "X", "cat": "kernel", "name": kernel, "pid": 0, "tid": 0,
                                     "ts": base + 14 + 20 * j, "dur": 3, "args": {
                                         "device": 0, "stream": 7, "correlation": corr,
                                         "grid": [grid, 1, 1], "block": [256, 1, 1]}})
            if phase == "capture":
                t.runtime("cudaStreamEndCapture", base + 60)
        ts += 200
    return t.write(path)


def test_cuda_captures_are_told_apart_by_the_kernels_their_ops_ran_eagerly(tmp_path: Path) -> None:
    # CUDA launches name no kernel: both windows match by order alone; the warm-up before each capture ran
    # the GEMM at grid 4 for bs 32 and grid 1 for bs 8, and the replay's GEMM ran at grid 4
    cap = cuda_capture([Layer(32, 64, 128, grids=(4, 8), annotation="bs32"),
                        Layer(8, 64, 128, grids=(1, 2), annotation="bs8")], tmp_path / "capture.json")
    rep = replay([(4, 8)], tmp_path / "replay.json")
    frame, facts = importers.read(rep, captures=[cap])
    mm = frame[frame["kernel_name"] == GEMM]
    assert list(mm["input_shapes"]) == ["[[32, 64], [64, 128]]"]
    assert list(mm["nvtx_path"]) == ["decode_step/bs32"]
    assert facts.extra["graphs"]["tied_launches"] == 0 and facts.extra["graphs"]["mapped"] == 2
