"""Where the time went (nsroof.report.breakdown): the category table sums to the run's time, with the bound
and headroom per category; prefill apart from decode with the batch that leaves the memory-bound regime; and
the summary and `analyze --by category/phase/step --json` show them."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from nsroof.report.breakdown import category_lines, category_table, phase_lines, phase_table
from nsroof.report.summary import render
from nsroof.roofs.ledger_analysis import batch_for_compute_bound
from tests.report.report_frames import five_kernels, kernel, make_report


def test_the_category_table_sums_to_the_runs_time() -> None:
    """five_kernels (2.0 ms): gemm 1.0 -> GEMM, copy 0.5 -> elementwise, mystery 0.2 + bogus 0.1 -> other,
    softmax 0.2 -> reduction/softmax (categorized by kernel name: the synthetic report names no op)."""
    table = category_table(five_kernels()).set_index("category")
    assert table["duration_s"].sum() == pytest.approx(2.0e-3)  # the run's Σ duration_s
    assert table["duration_s"].to_dict() == pytest.approx(
        {"GEMM": 1.0e-3, "elementwise": 0.5e-3, "other": 0.3e-3, "reduction/softmax": 0.2e-3})
    assert table.index.tolist()[:2] == ["GEMM", "elementwise"]  # longest first
    assert table.at["GEMM", "time_share"] == pytest.approx(0.5)
    # gemm's floor: max(10 GFLOP / 20 TFLOP/s, 1 GB / 2 TB/s) = 0.5 ms; headroom 1.0 / 0.5 = 2
    assert table.at["GEMM", "headroom"] == pytest.approx(2.0)
    assert table.at["GEMM", "roof_fraction"] == pytest.approx(0.5)
    # at the limiting level (DRAM: I = 10 at the ridge 10) the gemm is compute-bound
    assert table.at["GEMM", "bound"] == "compute"


def test_the_category_column_wins_over_the_names_and_copies_hold_no_bound() -> None:
    frame = make_report([
        kernel(0, "k0", 3e-3, 1e9, {"dram": 1e9, "l2": 1e9, "l1": 1e9}, category="attention"),
        kernel(1, "Memcpy HtoD", 1e-3, 0.0, {"dram": 1e6, "l2": 1e6, "l1": 1e6}, category="memcpy/memset",
               kind="memcpy"),
    ])
    table = category_table(frame).set_index("category")
    assert table["duration_s"].to_dict() == pytest.approx({"attention": 3e-3, "memcpy/memset": 1e-3})
    assert table.at["memcpy/memset", "bound"] == ""
    lines = "\n".join(category_lines(frame))
    assert "(copy/set)" in lines and "attention" in lines


def _generate_run() -> pd.DataFrame:
    """A prefill pass and a decode pass of a bf16 model with a 4096 x 4096 weight, batch 4, on GPU_A (ridge at
    DRAM 20e12 / 2e12 = 10 FLOP/B).
    decode GEMM: 2·4·4096·4096 = 134,217,728 FLOP over the weight's 4096·4096·2 = 33,554,432 bytes: I = 4
    prefill GEMM: 128 tokens per sequence, 32x the FLOPs over the same bytes: I = 128."""
    dram = {"dram": 33554432.0, "l2": 33554432.0, "l1": 33554432.0}
    lookup = {"dram": 4096.0, "l2": 4096.0, "l1": 4096.0}
    return make_report([
        kernel(0, "indexSelect", 1e-6, 0.0, lookup, op="aten::embedding",
               input_shapes="[[32000, 4096], [4, 128]]", category="embedding/index", phase="prefill"),
        kernel(1, "sm90_gemm", 500e-6, 32 * 134217728.0, dram, op="aten::mm", category="GEMM",
               phase="prefill"),
        kernel(2, "indexSelect", 1e-6, 0.0, lookup, op="aten::embedding",
               input_shapes="[[32000, 4096], [4, 1]]", category="embedding/index", phase="decode"),
        kernel(3, "sm90_gemm", 20e-6, 134217728.0, dram, op="aten::mm", category="GEMM", phase="decode"),
    ])


def test_prefill_and_decode_are_read_apart_with_the_decode_batch_that_leaves_memory_bound() -> None:
    table = phase_table(_generate_run()).set_index("phase")
    assert table.index.tolist() == ["prefill", "decode"]
    assert table.at["prefill", "duration_s"] == pytest.approx(501e-6)
    assert table.at["decode", "duration_s"] == pytest.approx(21e-6)
    assert table.at["prefill", "gemm_intensity"] == pytest.approx(128.0)
    assert table.at["decode", "gemm_intensity"] == pytest.approx(4.0)
    assert table.at["decode", "gemm_ridge"] == pytest.approx(10.0)
    assert table.at["decode", "tokens_per_step"] == 4  # indices [4, 1]
    # 4 × 10 / 4 = 10: the seed's ridge · weight bytes / 2 for bf16 (10 · 2 / 2)
    assert table.at["decode", "batch_to_leave_memory_bound"] == pytest.approx(10.0)
    assert batch_for_compute_bound(10.0, "bf16") == pytest.approx(10.0)
    text = "\n".join(phase_lines(_generate_run()))
    assert "prefill" in text and "at a batch of ~10 (batch × ridge / GEMM FLOP/B)" in text


def test_a_cpu_generate_run_counts_ops_in_its_phase_table() -> None:
    frame = _generate_run()
    assert "kernels" in phase_lines(frame)[1].split()
    frame["kind"] = "cpu_op"  # a CPU profile: its rows are op calls, not kernels
    assert phase_lines(frame)[1].split()[:3] == ["phase", "ops", "time"]


def test_a_run_that_is_no_generation_has_no_phase_table() -> None:
    assert phase_table(five_kernels()).empty
    assert phase_lines(five_kernels()) == []


def test_the_summary_opens_with_the_category_table() -> None:
    text = render(five_kernels(), width=100)
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("Time by category"))
    assert start < next(i for i, line in enumerate(lines) if line.startswith("Top "))
    assert lines[start + 1].split()[:3] == ["category", "kernels", "time"]
    assert lines[start + 2].split()[:2] == ["GEMM", "1"]


@pytest.mark.parametrize("by", ["category", "phase", "step"])
def test_analyze_by_prints_the_table_as_json(tmp_path: Path, by: str) -> None:
    from nsroof.commands.analyze import script_output
    from nsroof.pipeline import Report

    report = Report(_generate_run(), {"inputs": [{"name": "run.json", "facts": {"step_time": [
        {"step": "1", "start_us": 0.0, "wall_s": 0.1, "op_s": 0.06, "outside_ops_s": 0.04,
         "outside_ops_share": 0.4, "waits_s": 0.04, "between_ops_s": 0.0, "longest_gap_s": 0.04,
         "dataloader_s": 0.0, "kernel_s": 0.02, "gpu_busy_s": 0.015, "gpu_idle_s": 0.085}]}}]})
    records = json.loads(script_output(report, as_json=True, by=by))
    if by == "category":
        assert {r["category"] for r in records} == {"GEMM", "embedding/index"}
        assert sum(r["duration_s"] for r in records) == pytest.approx(522e-6)  # 1 + 500 + 1 + 20 µs
    elif by == "phase":
        assert [r["phase"] for r in records] == ["prefill", "decode"]
    else:
        assert records[0]["outside_ops_share"] == pytest.approx(0.4) and records[0]["source"] == "run.json"


def test_a_real_training_trace_accounts_its_time(shared_fixtures: Path) -> None:
    """kineto's ResNet-50 example (torch.profiler's tensorboard plugin, 6 ProfilerStep ranges): every kernel
    and copy in a category, the categories summing to the run's time; each step ~211 ms of which ~50 ms in
    the DataLoader, the input the GPU waits for."""
    from nsroof.pipeline import analyze
    from nsroof.report.breakdown import step_table

    path = shared_fixtures / "traces" / "kineto__plugin_resnet50_num_workers_0_worker0.pt.trace.json.gz"
    if not path.exists():
        pytest.skip(f"{path.name} not in the shared fixtures")
    report = analyze([path])
    kernels = report.frame.drop_duplicates(["source", "kernel_id"])
    assert (kernels["category"] != "").all()
    table = category_table(report.frame)
    assert table["duration_s"].sum() == pytest.approx(kernels["duration_s"].sum())
    assert table.iloc[0]["category"] == "convolution"
    steps = step_table(report.metadata)
    assert steps["step"].tolist() == ["5", "6", "7", "8", "9", "10"]
    assert steps["wall_s"].between(0.20, 0.23).all()
    assert steps["dataloader_s"].between(0.045, 0.065).all()
    assert (steps["op_s"] + steps["outside_ops_s"] - steps["wall_s"]).abs().max() < 1e-9
    assert (steps["gpu_busy_s"] <= steps["wall_s"] + steps["gpu_idle_s"]).all()
