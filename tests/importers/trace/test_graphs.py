"""CUDA/HIP graph replays (nsroof.importers.trace.graphs): kernels of a graph launch linked to the launch,
and with --capture to the ops recorded when the graph was captured. Small traces written here
(tests/data/traces), then the shared vLLM and SGLang replays with their capture traces."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from nsroof import importers
from nsroof.errors import InputError
from tests._cli import invoke
from tests._paths import DATA as TEST_DATA

DATA = TEST_DATA / "traces"


def _kernels(path: Path, *captures: Path) -> tuple[pd.DataFrame, Any]:
    frame, facts = importers.read(path, captures=captures)
    return frame[frame["kind"] == "kernel"].reset_index(drop=True), facts


def _op(facts: Any, op_id: Any) -> pd.Series:
    return facts.ops.set_index("op_id").loc[int(op_id)]


def test_without_a_capture_graph_kernels_have_the_launch_as_their_op_and_its_annotations() -> None:
    kernels, facts = _kernels(DATA / "graph_replay.json")
    assert list(kernels["op"]) == ["cudaGraphLaunch"] * 2
    assert list(kernels["op_link"]) == ["graph launch"] * 2
    assert list(kernels["nvtx_path"]) == ["step 0"] * 2
    assert kernels["op_id"].nunique() == 1 and kernels["op_id"].notna().all()
    assert any("--capture" in w for w in facts.warnings)


def test_capture_maps_each_kernel_to_the_op_that_issued_it_in_order() -> None:
    kernels, facts = _kernels(DATA / "graph_replay.json", DATA / "graph_capture.json")
    # CUDA's launches name no kernel: the two kernels pair with the first graph's two launches in order;
    # the second graph has one node, so fewer matches
    assert list(kernels["op"]) == ["aten::mm", "aten::relu"]
    assert list(kernels["op_link"]) == ["capture order"] * 2
    assert list(kernels["input_shapes"]) == ["[[8, 16], [16, 32]]", "[[8, 32]]"]
    # the replay's annotations, then those open when the op was captured
    assert list(kernels["nvtx_path"]) == ["step 0/capture_bs8"] * 2
    mm = _op(facts, kernels["op_id"][0])
    assert (mm["name"], mm["recorded_in"], mm["source"]) == ("aten::mm", "graph_capture.json",
                                                             "graph_replay.json")
    assert mm["input_shapes"] == [[8, 16], [16, 32]]
    # the replay's own ops come first: its graph launch; the capture's ops follow it
    assert int(kernels["op_id"][0]) >= 1
    assert facts.extra["graphs"]["mapped"] == 2 and facts.extra["graphs"]["captured_graphs"] == 2


def test_graph_and_node_ids_win_over_the_order_in_time() -> None:
    # the relu kernel runs first (another stream); its node id (5) was learnt from the capture session's own
    # replay, where node ids follow the capture order: relu stays relu
    kernels, _ = _kernels(DATA / "graph_replay_ids.json", DATA / "graph_capture.json")
    names = dict(zip(kernels["kernel_name"].str.slice(0, 12), kernels["op"], strict=True))
    assert names == {"void at::nat": "aten::relu", "ampere_sgemm": "aten::mm"}
    assert set(kernels["op_link"]) == {"capture graph node"}


def test_rocm_replay_pairs_kernels_by_name_and_reads_string_streams() -> None:
    kernels, _ = _kernels(DATA / "rocm_replay.json", DATA / "rocm_capture.json")
    # time order is norm then GEMM, capture order GEMM then norm: the launches' kernel names decide
    assert list(kernels["kernel_name"]) == ["rmsnorm_kernel", "Cijk_Alik_Bljk_HHS_BH_MT64x64"]
    assert list(kernels["op"]) == ["aiter::rmsnorm", "aten::mm"]
    assert list(kernels["stream"]) == [1, 0]  # "0x1", "0x0"
    assert list(kernels["nvtx_path"]) == ["execute_8_generation_8"] * 2


def test_a_capture_without_a_stream_capture_or_a_replay_without_graphs_says_so() -> None:
    _, facts = _kernels(DATA / "graph_replay.json", DATA / "cross_thread.json")
    assert any("cross_thread.json: no stream capture" in w for w in facts.warnings)
    _, facts = _kernels(DATA / "cross_thread.json", DATA / "graph_capture.json")
    assert any("--capture maps nothing" in w for w in facts.warnings)


def test_capture_of_another_format_is_refused(tmp_path: Path) -> None:
    csv = tmp_path / "k.csv"
    csv.write_text('"ID","Kernel Name"\n"0","k"\n')
    with pytest.raises(InputError, match="--capture maps graph replays"):
        importers.read(csv, captures=[DATA / "graph_capture.json"])


def test_analyze_cli_takes_repeatable_captures(tmp_path: Path) -> None:
    out = tmp_path / "r.parquet"
    code, stdout, stderr = invoke("analyze", str(DATA / "graph_replay.json"),
                                  "--capture", str(DATA / "graph_capture.json"),
                                  "--capture", str(DATA / "rocm_capture.json"), "-o", str(out),
                                  "--machine", "a100-40gb")
    assert code == 0, stdout + stderr
    report = pd.read_parquet(out)
    assert set(report["op"]) == {"aten::mm", "aten::relu"}


# --------------------------------------------------------------------------- the shared graph traces

GRAPH_TRACES = {
    # replay: (capture, kernels, peer: an op and its direct kernel time in TraceLens's ops_summary.csv)
    "tracelens__vllm_decode_full__graph_execution.json.gz": (
        "tracelens__vllm_decode_full__graph_capture_rank_0.1773709742341309550.pt.trace.json.gz", 425,
        "vllm_decode_full", "aten::addmm"),
    "tracelens__sglang_decode__sglang_Qwen3-8B_decode.json.gz": (
        "tracelens__sglang_decode__capture_bs_32_rank0.json.gz", 555, "sglang_decode", "aten::mm"),
}


@pytest.mark.parametrize("replay", sorted(GRAPH_TRACES))
def test_shared_graph_replays_have_an_op_for_every_kernel(shared_fixtures: Path, replay: str) -> None:
    kernels, facts = _kernels(shared_fixtures / "traces" / replay)
    assert len(kernels) == GRAPH_TRACES[replay][1]
    assert kernels["op_id"].notna().all()  # no "launching op not in the trace": the launches are there
    assert (kernels["op_link"] == "graph launch").sum() > 400
    assert (kernels["nvtx_path"] != "").all()  # the engine's step annotation around the launch
    # ROCm's device ids are profiler agents (2, 9), deviceProperties counts GPUs from 0: one model listed
    assert set(kernels["device"]) == {"AMD Instinct MI300X" if "sglang" in replay else ""}


@pytest.mark.parametrize("replay", sorted(GRAPH_TRACES))
def test_shared_replays_with_their_capture_carry_the_captured_ops(shared_fixtures: Path, replay: str) -> None:
    capture, _, peer, op = GRAPH_TRACES[replay]
    kernels, facts = _kernels(shared_fixtures / "traces" / replay, shared_fixtures / "traces" / capture)
    recorded = kernels["op_id"].map(facts.ops.set_index("op_id")["recorded_in"])
    time = kernels["gpu__time_duration.sum"]
    assert time[recorded == capture].sum() >= 0.95 * time.sum()
    assert facts.extra["graphs"]["unmapped"] == 0 and facts.extra["graphs"]["tied_launches"] == 0
    # the peer's direct kernel time of the op (its own reading of the same traces) agrees to 0.01%
    summary = pd.read_csv(shared_fixtures / "peer" / "tracelens" / peer / "ops_summary.csv")
    theirs_us = summary.loc[summary["name"] == op, "total_direct_kernel_time_sum"].sum()
    ours_us = time[kernels["op"] == op].sum() * 1e6
    assert ours_us == pytest.approx(theirs_us, rel=1e-4)
    # shapes come with the captured ops
    assert (kernels.loc[kernels["op"] == op, "input_shapes"] != "").all()


@pytest.mark.parametrize(("replay", "capture", "config", "at_least"), [
    # SGLang decode of Qwen3-8B (dense): the capture's ops carry every formula the replay needs
    ("tracelens__sglang_decode__sglang_Qwen3-8B_decode.json.gz",
     "tracelens__sglang_decode__capture_bs_32_rank0.json.gz",
     None, 0.60),
    # vLLM decode of an MoE model: 32 experts, top-4, hidden 2880, 24 layers, mxfp4 expert GEMMs in the trace
    # (TraceLens's own MoE table for it: num_experts 32, topk 4, 24 calls) = gpt-oss-20b;
    # its public config.json (tests/data/models/gpt-oss-20b.config.json) gives vllm::moe_forward
    # the facts the trace lacks
    ("tracelens__vllm_decode_full__graph_execution.json.gz",
     "tracelens__vllm_decode_full__graph_capture_rank_0.1773709742341309550.pt.trace.json.gz",
     "gpt-oss-20b.config.json", 0.60),
])
def test_graph_replays_with_their_capture_are_mostly_costed(shared_fixtures: Path, replay: str, capture: str,
                                                            config: str | None, at_least: float) -> None:
    from nsroof.costs.ledger.custom import using_model
    from nsroof.costs.ledger.engine_context import read_model_config
    from nsroof.pipeline import analyze
    from nsroof.report.summary import analytic_coverage

    traces = shared_fixtures / "traces"
    model = read_model_config(str(DATA.parent / "models" / config)) if config else None
    with using_model(model):
        report = analyze([traces / replay], captures=[traces / capture])
    share = float(analytic_coverage(report.frame, [replay])["share"].iloc[0])
    assert share >= at_least, share


@pytest.mark.parametrize("replay", sorted(GRAPH_TRACES))
def test_shared_replays_carry_whole_costs_never_shares_of_replays(shared_fixtures: Path, replay: str) -> None:
    from nsroof.pipeline import analyze

    traces = shared_fixtures / "traces"
    report = analyze([traces / replay], captures=[traces / GRAPH_TRACES[replay][0]])
    sources = report.frame["flops_source"].dropna().astype(str)
    # no cost divided by a replay or match count (the share note "×0.25 (1 of 4 kernels of one op …)"); the
    # one split left is rule 3's within one call: a fused MoE's work in its gate/up and down GEMM kernels
    shares = sources[sources.str.contains("kernels of one op|×0\\.", regex=True)]
    assert (shares.str.contains("moe_forward") & shares.str.contains("×0.5 (1 of 2 kernels of one op",
                                                                     regex=False)).all()
    assert (sources.str.startswith("analytic:")).sum() > 100
    facts = report.metadata["inputs"][0]["facts"]["graphs"]
    assert facts["graph_launches"] == 1 and facts["ambiguous_launches"] == 0
