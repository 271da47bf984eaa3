"""CUDA graphs in Nsight Systems exports: node-level tracing (`--cuda-graph-trace=node`) gives each kernel of
a replay as a kernel row with its graph and node id, linked to the graph launch; whole-graph tracing
(CUPTI_ACTIVITY_KIND_GRAPH_TRACE) gives one row per launch (kind graph), timed, inside its NVTX range, and
uncosted with the reason."""

from __future__ import annotations

from pathlib import Path

import pytest

from nsroof import importers
from nsroof.pipeline import analyze
from tests.importers.nsys.synthetic import Export, write


def test_node_level_tracing_gives_every_graph_kernel_a_row(tmp_path: Path) -> None:
    # two replays of a 2-kernel graph (id 5, nodes 11, 12): a replay's kernels share its launch's correlation
    export = Export(ranges=[("decode", 0, 10_000, 1)])
    for replay, corr in enumerate((40, 41)):
        t = 1000 + replay * 3000
        export.launches.append(("cudaGraphLaunch_v10000", t, t + 50, corr, 1))
        export.kernels += [("gemm_a", t + 500, t + 900, corr, 7, 11, 5),
                           ("gemm_b", t + 900, t + 1200, corr, 7, 12, 5)]
    frame, _ = importers.read(write(tmp_path / "node.sqlite", export))
    assert frame["kind"].tolist() == ["kernel"] * 4
    assert frame["function"].tolist() == ["gemm_a", "gemm_b"] * 2
    assert set(frame["op_link"]) == {"graph launch"} and set(frame["op"]) == {"cudaGraphLaunch_v10000"}
    assert set(frame["nvtx_path"]) == {"decode"}
    # 400 + 300 ns per replay, twice
    assert frame["gpu__time_duration.sum"].sum() == pytest.approx(1400e-9)


def test_whole_graph_tracing_gives_one_timed_uncosted_row_per_launch(tmp_path: Path) -> None:
    export = Export(ranges=[("decode_step", 0, 20_000, 1)], kernels=[("warmup", 100, 200, 1, 7)],
                    launches=[("cudaLaunchKernel_v7000", 10, 20, 1, 1)])
    for k, corr in enumerate((50, 51, 52)):
        export.launches.append(("cudaGraphLaunch_v10000", 1000 + k * 5000, 1100 + k * 5000, corr, 1))
        export.graph_launches.append((2000 + k * 5000, 6000 + k * 5000, corr, 9))
    path = write(tmp_path / "graph.sqlite", export)
    frame, facts = importers.read(path)
    graphs = frame[frame["kind"] == "graph"]
    assert len(graphs) == 3 and len(frame) == 4  # the kernel table's row, and one per graph launch
    assert graphs["gpu__time_duration.sum"].tolist() == pytest.approx([4000e-9] * 3)
    assert set(graphs["nvtx_path"]) == {"decode_step"} and set(graphs["kernel_name"]) == {
        "CUDA graph 9 (whole-graph trace)"}
    assert facts.extra["nsys"]["graph_launches"] == 3
    rows = analyze(path).frame
    graph_rows = rows[(rows["kind"] == "graph") & (rows["level"] == "dram")]
    assert graph_rows["flops"].isna().all()
    assert graph_rows["missing"].str.startswith("a whole CUDA graph's execution").all()
