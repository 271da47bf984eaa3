"""`nsroof compare`: kernels matched by function + NVTX path, per-range roll-up, time / bytes / bound
changes, like with like (per-step and per-launch normalisation, warnings when devices, ncu versions,
clocks or step counts differ, CPU words for CPU ops), on small generated exports and on two real reports."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest
from click.testing import CliRunner

from nsroof.cli import cli
from nsroof.pipeline import analyze
from nsroof.report import compare as cmp
from tests.dataset.test_dataset import raw_csv

# A100 40GB spec roofs: FP32 SIMT 19.5e12 FLOP/s, DRAM 1.555e12 B/s -> ridge 12.54 FLOP/byte.
# (name, DRAM bytes, duration ns, FFMA thread instructions; FLOP = 2 x FFMA)
BEFORE = [
    # I = 0.5: memory
    ("void axpy<float>(float, float const*, float*, int)", 1_000_000_000, 1_000_000, 250_000_000),
    # 2nd launch
    ("void axpy<float>(float, float const*, float*, int)", 1_000_000_000, 1_000_000, 250_000_000),
    ("gemm_kernel(float*)", 100_000_000, 6_000_000, 50_000_000_000),  # I = 1e11 / 1e8 = 1000: compute
    ("softmax_kernel(float*)", 1_000_000_000, 800_000, 250_000_000),  # I = 0.5: memory
    ("old_copy(float*)", 400_000_000, 300_000, 0),
]
AFTER = [
    # half the bytes
    ("void axpy<float>(float, float const*, float*, int)", 500_000_000, 500_000, 250_000_000),
    ("void axpy<float>(float, float const*, float*, int)", 500_000_000, 500_000, 250_000_000),
    ("gemm_kernel(float*)", 100_000_000, 3_000_000, 50_000_000_000),  # 2x faster, same traffic
    ("softmax_kernel(float*)", 10_000_000, 100_000, 250_000_000),  # I = 5e8 / 1e7 = 50 > 12.54: compute now
    ("fused_epilogue(float*)", 1_000_000, 50_000, 1_000_000),
]
# NVTX path of each launch, in order (the generated CSV has no NVTX columns; compare is pure on reports)
PATHS_BEFORE = ["train/fwd", "train/fwd", "train/fwd", "train/bwd", "train/bwd"]
PATHS_AFTER = ["train/fwd", "train/fwd", "train/fwd", "train/bwd", "train/bwd"]


def report(tmp_path: Path, name: str, kernels: list[tuple[str, int, int, int]],
           paths: list[str]) -> pd.DataFrame:
    src = tmp_path / f"{name}.csv"
    src.write_text(raw_csv(kernels))
    frame = analyze([src]).frame
    by_id = dict(enumerate(paths))
    frame["nvtx_path"] = frame["kernel_id"].map(by_id)
    return frame


@pytest.fixture()
def pair(tmp_path: Path) -> tuple[pd.DataFrame, pd.DataFrame]:
    return report(tmp_path, "before", BEFORE, PATHS_BEFORE), report(tmp_path, "after", AFTER, PATHS_AFTER)


def row(table: pd.DataFrame, function: str) -> pd.Series:
    hit = table[table["function"] == function]
    assert len(hit) == 1, function
    return hit.iloc[0]


def test_kernels_matched_by_function_and_nvtx_path(pair: tuple[pd.DataFrame, pd.DataFrame]) -> None:
    k = cmp.compare_kernels(*pair)
    assert dict(zip(k["function"], k["status"], strict=True)) == {
        "axpy": "both", "gemm_kernel": "both", "softmax_kernel": "both", "old_copy": "removed",
        "fused_epilogue": "added"}
    axpy = row(k, "axpy")
    # two launches merged on each side: 2 x 1 ms -> 2 x 0.5 ms, 2 x 1e9 B -> 2 x 5e8 B
    assert (axpy.launches_before, axpy.launches_after) == (2, 2)
    assert axpy.duration_s_before == pytest.approx(2e-3) and axpy.duration_s_after == pytest.approx(1e-3)
    assert axpy.delta_s == pytest.approx(-1e-3) and axpy.speedup == pytest.approx(2.0)
    assert axpy.bytes_dram_before == 2e9 and axpy.delta_bytes_dram == -1e9
    assert axpy.bytes_l2_before == 4e9  # the generator writes L2 = 2 x DRAM
    gemm = row(k, "gemm_kernel")
    assert gemm.delta_s == pytest.approx(-3e-3) and gemm.delta_bytes_dram == 0
    assert (gemm.bound_dram_before, gemm.bound_dram_after, gemm.bound_dram_changed) == (
        "compute", "compute", False)
    # largest |time change| first: gemm (-3 ms), axpy (-1 ms), softmax (-0.7 ms), old_copy (-0.3 ms),
    # fused (+0.05 ms)
    assert list(k["function"]) == ["gemm_kernel", "axpy", "softmax_kernel", "old_copy", "fused_epilogue"]


def test_bound_change_is_reported(pair: tuple[pd.DataFrame, pd.DataFrame]) -> None:
    k = cmp.compare_kernels(*pair)
    sm = row(k, "softmax_kernel")
    # before I = 5e8 FLOP / 1e9 B = 0.5 < 12.54 -> memory; after 5e8 / 1e7 = 50 > 12.54 -> compute
    assert (sm.bound_dram_before, sm.bound_dram_after, sm.bound_dram_changed) == ("memory", "compute", True)
    added = row(k, "fused_epilogue")
    assert pd.isna(added.duration_s_before) and added.delta_s == pytest.approx(5e-5)
    assert not added.bound_dram_changed


def test_same_function_under_two_ranges_stays_apart(tmp_path: Path) -> None:
    kernels = [BEFORE[0], BEFORE[0]]
    a = report(tmp_path, "a", kernels, ["fwd", "bwd"])
    b = report(tmp_path, "b", kernels, ["fwd", "fwd"])
    k = cmp.compare_kernels(a, b).set_index(["function", "nvtx_path"])
    assert k.loc[("axpy", "fwd"), "launches_before"] == 1 and k.loc[("axpy", "fwd"), "launches_after"] == 2
    assert k.loc[("axpy", "bwd"), "status"] == "removed"


def test_per_nvtx_range_rollup(pair: tuple[pd.DataFrame, pd.DataFrame]) -> None:
    r = cmp.compare_ranges(*pair).set_index("nvtx_range")
    assert list(r.index) == ["train", "train/bwd", "train/fwd"]
    # train/fwd: before 1 + 1 + 6 = 8 ms, after 0.5 + 0.5 + 3 = 4 ms
    assert r.loc["train/fwd", "duration_s_before"] == pytest.approx(8e-3)
    assert r.loc["train/fwd", "duration_s_after"] == pytest.approx(4e-3)
    # train = fwd + bwd: before 8 + 0.8 + 0.3 = 9.1 ms, after 4 + 0.1 + 0.05 = 4.15 ms
    assert r.loc["train", "duration_s_before"] == pytest.approx(9.1e-3)
    assert r.loc["train", "delta_s"] == pytest.approx(4.15e-3 - 9.1e-3)
    assert r.loc["train", "depth"] == 1 and r.loc["train/bwd", "depth"] == 2
    # memory-bound share of train/bwd time: before softmax 0.8 ms + old_copy 0.3 ms (0 FLOP over 4e8 B:
    # intensity 0, memory-bound) = 1.1 of 1.1 ms; after softmax is compute-bound (0.1 ms) and the
    # 1 MB fused_epilogue (2e6 FLOP / 1e6 B = 2 < 12.54) memory-bound: 0.05 / 0.15 = 1/3
    assert r.loc["train/bwd", "memory_bound_share_before"] == pytest.approx(1.0)
    assert r.loc["train/bwd", "memory_bound_share_after"] == pytest.approx(1 / 3)
    # bytes per level roll up too: train/fwd DRAM 2e9 + 1e8 -> 1e9 + 1e8
    assert r.loc["train/fwd", "delta_bytes_dram"] == pytest.approx(-1e9)


def test_emit_nvtx_counters_do_not_break_matching(tmp_path: Path) -> None:
    # one op added upstream shifts every seq / op_id / input_op_ids; the shapes stay and still key
    def marker(op: str, seq: int, op_id: int, sizes: str) -> str:
        return f"{op}, seq = {seq}, op_id = {op_id}, sizes = {sizes}, input_op_ids = [({op_id - 1}, 0)]"

    names = [k[0] for k in BEFORE[:4]]
    shapes = ["[[64, 128]]", "[[64, 128]]", "[[64, 128], [128, 256]]", "[[64, 256]]"]
    paths_a = [f"fwd/{marker('aten::' + str(i), 10 + i, 50 + i, s)}" for i, s in enumerate(shapes)]
    paths_b = [f"fwd/{marker('aten::' + str(i), 11 + i, 51 + i, s)}" for i, s in enumerate(shapes)]
    # the same op with a new shape is a different kernel call: it must not match
    paths_b[3] = f"fwd/{marker('aten::3', 14, 54, '[[64, 512]]')}"
    a = report(tmp_path, "a", BEFORE[:4], paths_a)
    b = report(tmp_path, "b", AFTER[:4], paths_b)
    k = cmp.compare_kernels(a, b)
    both = k[k["status"] == "both"]
    assert sorted(both["function"]) == ["axpy", "axpy", "gemm_kernel"] and len(names) == 4
    assert set(both["nvtx_path"]) == {"fwd/aten::0, sizes = [[64, 128]]", "fwd/aten::1, sizes = [[64, 128]]",
                                      "fwd/aten::2, sizes = [[64, 128], [128, 256]]"}
    assert sorted(k.loc[k["status"] != "both", "status"]) == ["added", "removed"]  # softmax: new shape
    text = cmp.render(k)
    assert "3 matched by function + NVTX path" in text and "1 only before, 1 only after" in text
    ranges = cmp.compare_ranges(a, b)
    fwd = ranges[ranges["nvtx_range"] == "fwd"].iloc[0]
    assert (fwd.kernels_before, fwd.kernels_after) == (4, 4)


def test_kernels_without_nvtx_fall_into_one_range(tmp_path: Path) -> None:
    a = report(tmp_path, "a", BEFORE[:1], [""])
    assert list(cmp.range_table(a).index.get_level_values("nvtx_range")) == [cmp.NO_RANGE]


def test_cli_on_report_files_and_a_dataset(pair: tuple[pd.DataFrame, pd.DataFrame], tmp_path: Path) -> None:
    from nsroof.report import parquet

    a_path, b_path = tmp_path / "a.parquet", tmp_path / "b.parquet"
    parquet.write(pair[0], a_path)
    parquet.write(pair[1], b_path)
    res = CliRunner().invoke(cli, ["compare", str(a_path), str(b_path), "--top", "3", "-o",
                                   str(tmp_path / "k.csv")])
    assert res.exit_code == 0, res.output
    out = res.output
    assert "3 matched by function + NVTX path, 1 only before, 1 only after" in out
    assert "kernel time: 9.100 ms -> 4.150 ms (-4.950 ms, speedup 2.19x)" in out  # 9.1 / 4.15 = 2.19
    assert "bound changed: 1 at dram" in out and "memory->compute" in out
    assert "... 2 more" in out and "per NVTX range:" in out
    written = pd.read_csv(tmp_path / "k.csv")
    assert len(written) == 5 and (tmp_path / "k.ranges.csv").exists()
    js = CliRunner().invoke(cli, ["compare", str(a_path), str(b_path), "--json"])
    doc = json.loads(js.output)
    assert {r["function"] for r in doc["kernels"]} == {"axpy", "gemm_kernel", "softmax_kernel", "old_copy",
                                                       "fused_epilogue"}
    # a dataset folder compares like a report
    from nsroof.dataset import analyze_many

    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "rank0.csv").write_text(raw_csv(AFTER))
    analyze_many([tmp_path / "in"], tmp_path / "ds", jobs=1)
    plain = tmp_path / "plain.parquet"
    parquet.write(analyze([tmp_path / "in" / "rank0.csv"]).frame, plain)
    ds = CliRunner().invoke(cli, ["compare", str(plain), str(tmp_path / "ds"), "--no-ranges"])
    # AFTER holds 5 launches of 4 functions, none under an NVTX range
    assert ds.exit_code == 0 and "4 matched by function + NVTX path, 0 only before, 0 only after" in ds.output


def test_cli_errors_are_one_line(tmp_path: Path) -> None:
    res = CliRunner().invoke(cli, ["compare", str(tmp_path / "absent.parquet"), str(tmp_path / "b.parquet")])
    assert res.exit_code == 2
    assert (res.stderr.strip().count("\n") == 0 and "absent.parquet" in res.stderr
            and "Traceback" not in res.stderr)


def test_two_real_reports(shared_fixtures: Path) -> None:
    # AveryClapp/ESMM-Research: the --metrics CSV of 9 SGEMM variants vs the later roofline-only
    # .ncu-rep (converted raw page) of 4 of them, both on an A10G.
    before = analyze([shared_fixtures / "csv" / "averyclapp__metrics.csv"], machine="a10g").frame
    after = analyze([shared_fixtures / "converted" / "averyclapp__profile_output.raw_base.csv"]).frame
    k = cmp.compare_kernels(before, after)
    both = set(k.loc[k["status"] == "both", "function"])
    assert both == {"one_blocktiling", "two_blocktiling", "vectorized_blocktiling", "warptiling"}
    assert set(k.loc[k["status"] == "removed", "function"]) == {"basic", "gmem_coalesce", "smem_blocking",
                                                                "ampere_sgemm_128x64_nn"}
    assert not (k["status"] == "added").any()
    w = row(k, "warptiling")
    # gpu__time_duration.sum 223,904 ns in metrics.csv (values as the exports print them)
    assert w.duration_s_before == pytest.approx(223.90e-6, rel=1e-3)
    assert w.bound_dram_before == "compute" and w.bound_dram_after == "compute"
    # the same NVTX-annotated report exported two ways (raw page vs details page) compares as identical
    raw = analyze([shared_fixtures / "converted" / "nsighttraining__manual_nvtx.raw_base.csv"]).frame
    det = analyze([shared_fixtures / "converted" / "nsighttraining__manual_nvtx.details_base.csv"]).frame
    same = cmp.compare_kernels(raw, det)
    assert set(same["status"]) == {"both"} and (same["delta_s"] == 0).all()
    assert set(same["nvtx_path"]) == {"run_test/init_data", "run_test/daxpy", "run_test/check_results"}


# ---------------------------------------------------------------- like with like

AXPY, GEMM = BEFORE[0], BEFORE[2]  # 1 ms and 6 ms per launch


def steps_run(tmp_path: Path, name: str, steps: int, **kw: str) -> pd.DataFrame:
    """The same script run for `steps` steps: each step launches axpy and gemm once, under ProfilerStep#N."""
    kernels = [k for _ in range(steps) for k in (AXPY, GEMM)]
    paths = [f"ProfilerStep#{i // 2}/train" for i in range(2 * steps)]
    src = tmp_path / f"{name}.csv"
    src.write_text(raw_csv(kernels, **kw))
    frame = analyze([src]).frame
    frame["nvtx_path"] = frame["kernel_id"].map(dict(enumerate(paths)))
    return frame


def test_two_steps_against_four_compare_per_step(tmp_path: Path) -> None:
    a, b = steps_run(tmp_path, "two", 2), steps_run(tmp_path, "four", 4)
    assert (cmp.steps_in(a), cmp.steps_in(b)) == (2, 4)  # distinct ProfilerStep#N ranges
    c = cmp.compare(a, b)
    assert c.per == "step" and c.steps == (2, 4)
    k = c.kernels.set_index("function")
    # step 0 of one run matches step 3 of the other: the step number is not part of the key
    assert set(k["nvtx_path"]) == {"ProfilerStep#*/train"} and set(k["status"]) == {"both"}
    # per step: gemm 2 x 6 ms / 2 steps = 6 ms before, 4 x 6 ms / 4 = 6 ms after -> speedup 1.00
    assert k.loc["gemm_kernel", "duration_s_before"] == pytest.approx(6e-3)
    assert k.loc["gemm_kernel", "duration_s_after"] == pytest.approx(6e-3)
    assert k.loc["gemm_kernel", "launches_before"] == k.loc["gemm_kernel", "launches_after"] == 1
    text = cmp.render(c, before_name="two", after_name="four")
    assert "normalised: per step (before 2 steps, after 4)" in text
    assert "warning: step counts differ: 2 vs 4" in text
    # per step: 7 ms -> 7 ms, not the 14 ms -> 28 ms ("speedup 0.50x") of the raw totals
    assert "kernel time: 7.000 ms -> 7.000 ms (±0.000 ns, speedup 1.00x)" in text
    raw = cmp.render(cmp.compare(a, b, per="run"))
    assert "speedup 0.50x" in raw and "launch counts differ for 2 matched kernel(s)" in raw


def test_without_step_counts_launch_counts_are_normalised_per_launch(tmp_path: Path) -> None:
    a = report(tmp_path, "a", [AXPY, AXPY, GEMM], ["fwd", "fwd", "fwd"])
    faster_gemm = (GEMM[0], GEMM[1], 3_000_000, GEMM[3])
    b = report(tmp_path, "b", [AXPY] * 4 + [faster_gemm], ["fwd"] * 5)
    c = cmp.compare(a, b)
    assert c.per == "launch" and c.steps == (None, None)
    k = c.kernels.set_index("function")
    # axpy: 1 ms per launch on both sides; before scaled to the after run's 4 launches: 4 ms vs 4 ms
    assert (k.loc["axpy", "duration_s_before"] == pytest.approx(4e-3)
            and k.loc["axpy", "speedup"] == pytest.approx(1.0))
    assert (k.loc["axpy", "launches_before"], k.loc["axpy", "launches_after"]) == (2, 4)
    # bytes scale too: 2 launches x 1e9 B -> 4 launches' worth, 4e9 B, equal to the after side
    assert k.loc["axpy", "delta_bytes_dram"] == 0
    # gemm: 6 ms -> 3 ms for 1 launch each; totals (4 + 6) ms -> (4 + 3) ms = 1.43x, the work held equal
    text = cmp.render(c)
    assert ("normalised: per launch" in text and "kernel time: 10.000 ms -> 7.000 ms" in text
            and "speedup 1.43x" in text)


def test_same_work_is_compared_as_measured(pair: tuple[pd.DataFrame, pd.DataFrame]) -> None:
    c = cmp.compare(*pair)
    assert c.per == "run" and c.warnings == []
    assert "normalised: as measured (per run)" in cmp.render(c)


def test_different_devices_are_said(tmp_path: Path) -> None:
    a = report(tmp_path, "a", BEFORE[:1], ["fwd"])
    src = tmp_path / "h100.csv"
    src.write_text(raw_csv(BEFORE[:1], device="NVIDIA H100 80GB HBM3"))
    b = analyze([src]).frame
    b["nvtx_path"] = "fwd"
    text = cmp.render(cmp.compare(a, b))
    assert "warning: devices differ: NVIDIA A100-SXM4-40GB vs NVIDIA H100 80GB HBM3" in text


def test_different_ncu_versions_are_said(tmp_path: Path) -> None:
    src = tmp_path / "a.csv"
    src.write_text(raw_csv(BEFORE[:1]))
    rep = analyze([src])
    # the pipeline records the export's layout next to its format: what tells ncu versions apart
    assert (rep.metadata["inputs"][0]["format"].startswith("ncu-csv")
            and rep.metadata["inputs"][0]["layout"] == "new")
    old = {"inputs": [{"format": "ncu-csv:raw", "layout": "old"}]}
    c = cmp.compare(rep.frame, rep.frame, metadata=(old, rep.metadata))
    assert c.warnings == ["ncu versions differ: ncu ≤ 2022.3 (Kernel Time column) vs ncu ≥ 2023 "
                          "(Block/Grid Size, Device, CC columns) — metric sets and roofs may differ"]
    assert cmp.compare(rep.frame, rep.frame, metadata=(rep.metadata, rep.metadata)).warnings == []
    # two .ncu-rep file versions; and the same report as a details page and as a raw page is no version change
    rep7, rep9 = ({"inputs": [{"format": "ncu-rep", "report_file_version": v}]} for v in ("7", "9"))
    assert cmp.compare(rep.frame, rep.frame, metadata=(rep7, rep9)).warnings[0].startswith(
        "ncu versions differ: .ncu-rep file version 7 vs .ncu-rep file version 9")
    details = {"inputs": [{"format": "ncu-csv:details", "layout": "new"}]}
    assert cmp.compare(rep.frame, rep.frame, metadata=(details, rep.metadata)).warnings == []


def test_different_clocks_are_said(tmp_path: Path) -> None:
    a = report(tmp_path, "a", BEFORE[2:3], ["fwd"])
    a["ceiling_source"] = "ncu:sm__sass_thread_inst_executed_op_ffma_pred_on.sum.peak_sustained"
    b = a.copy()
    # ncu roofs = peak per cycle x the clock the kernel ran at: 19.5 -> 17.55 TFLOP/s is a 10% lower clock
    a["peak_flop_per_s"], b["peak_flop_per_s"] = 19.5e12, 17.55e12
    warnings = cmp.compare(a, b).warnings
    assert len(warnings) == 1 and warnings[0].startswith("clocks differ: ncu measured the fp32 roof at 19.5 "
                                                         "vs 17.6 TFLOP/s")
    b["peak_flop_per_s"] = 19.3e12  # 1% apart: within the tolerance (2%)
    assert cmp.compare(a, b).warnings == []


def test_cpu_ops_are_called_ops_not_gpu_kernels(tmp_path: Path) -> None:
    a = report(tmp_path, "a", BEFORE[:3], ["fwd"] * 3)
    a["duration_source"] = "torch.profiler:cpu_time_total"
    a["device"] = "Intel(R) Xeon(R) CPU"
    text = cmp.render(cmp.compare(a, a.copy()))
    assert "op time: 8.000 ms -> 8.000 ms" in text and "ops: 2 matched by op + NVTX path" in text
    assert "kernel time" not in text and "kernel [NVTX path]" not in text
    gpu = report(tmp_path, "g", BEFORE[:3], ["fwd"] * 3)
    mixed = cmp.compare(a, gpu)
    assert any("CPU op profile" in w for w in mixed.warnings)


def test_step_counts_from_profile_metadata(tmp_path: Path) -> None:
    a = report(tmp_path, "a", BEFORE[:1], ["fwd"])
    assert cmp.steps_in(a, {"steps": 3}) == 3
    assert cmp.steps_in(a, {"steps": None, "steps_marked": 5, "warmup": 1}) == 4
    assert cmp.steps_in(a, {}) is None
    c = cmp.compare(a, a.copy(), metadata=({"steps": 2}, {}))
    assert c.per == "run" and "step count known for the before run only (2)" in c.warnings


def test_cli_per_step_without_step_counts_is_one_line(pair: tuple[pd.DataFrame, pd.DataFrame],
                                                      tmp_path: Path) -> None:
    from nsroof.report import parquet

    a_path, b_path = tmp_path / "a.parquet", tmp_path / "b.parquet"
    parquet.write(pair[0], a_path)
    parquet.write(pair[1], b_path)
    res = CliRunner().invoke(cli, ["compare", str(a_path), str(b_path), "--per", "step"])
    assert res.exit_code == 2 and "step counts" in res.stderr and res.stderr.strip().count("\n") == 0
    js = json.loads(CliRunner().invoke(cli, ["compare", str(a_path), str(b_path), "--json"]).output)
    assert js["per"] == "run" and js["warnings"] == [] and js["steps"] == [None, None]


def test_a_real_trace_against_one_of_its_steps(shared_fixtures: Path) -> None:
    # HTA's sampled rank-0 trace holds two ProfilerStep#N ranges; its first step alone is a 1-step run
    full = analyze([shared_fixtures / "traces" / "hta__timeline_analysis_sampled_rank-0.json.gz"]).frame
    steps = sorted({p.split("/")[0] for p in full["nvtx_path"].astype(str) if p.startswith("ProfilerStep#")})
    assert len(steps) == 2
    one = full[full["nvtx_path"].astype(str).str.startswith(steps[0] + "/")]
    c = cmp.compare(full, one)
    assert (c.per, c.steps) == ("step", (2, 1)) and "step counts differ: 2 vs 1" in c.warnings
    # the step number is out of the key: every kernel of the one step matches one of the two-step run
    assert not (c.kernels["status"] == "added").any()
    # per step: the two-step run's kernel time (each launch once, not once per level) halved
    per_launch = full.drop_duplicates(["source", "kernel_id"])
    assert c.kernels["duration_s_before"].sum() == pytest.approx(per_launch["duration_s"].sum() / 2)
    assert c.kernels["duration_s_after"].sum() == pytest.approx(
        one.drop_duplicates(["source", "kernel_id"])["duration_s"].sum())


def test_two_real_reports_from_different_devices_say_so(shared_fixtures: Path) -> None:
    a10g = analyze([shared_fixtures / "converted" / "averyclapp__profile_output.raw_base.csv"])
    rtx = analyze([shared_fixtures / "converted" / "lashi__index.raw_base.csv"])
    c = cmp.compare(a10g.frame, rtx.frame, metadata=(a10g.metadata, rtx.metadata))
    assert c.warnings[0] == ("devices differ: NVIDIA A10G vs NVIDIA GeForce RTX 4090 — the change includes "
                             "the hardware")


def test_the_gpu_busy_time_is_compared_beside_the_summed_kernel_time(tmp_path: Path) -> None:
    import json

    from nsroof.pipeline import analyze
    from tests.roofs.test_classify_link import write_trace

    before = write_trace(tmp_path, "NVIDIA H100 80GB HBM3", "before.json")
    after = tmp_path / "after.json"
    trace = json.loads(before.read_text())
    for e in trace["traceEvents"]:
        if e.get("name") == "ampere_sgemm_64x64_nn":
            e["ts"] = 120.0  # the GEMM now runs after the all-reduce instead of beside it
    after.write_text(json.dumps(trace))
    text = cmp.render(cmp.compare(analyze(before).frame, analyze(after).frame))
    # 20 µs + 20 µs summed on both sides; busy [100, 130) = 30 µs before, [100, 140) = 40 µs after
    assert "kernel time: 40.000 us -> 40.000 us" in text
    assert ("GPU busy (kernels overlapping on streams counted once): 30.000 us -> 40.000 us "
            "(+10.000 us") in text


def test_a_collective_is_compared_at_its_link(tmp_path: Path) -> None:
    from tests.roofs.test_classify_link import write_trace

    before = write_trace(tmp_path, "NVIDIA H100 80GB HBM3", "before.json")
    after = tmp_path / "after.json"
    # after: the all-reduce moves half the tensor, [512, 1024] fp32, in 10 µs instead of 20
    trace = json.loads(before.read_text())
    for e in trace["traceEvents"]:
        if e["name"] == "vllm::all_reduce":
            e["args"]["Input Dims"] = [[512, 1024], []]
        if e["name"].startswith("ncclDevKernel"):
            e["dur"] = 10.0
    after.write_text(json.dumps(trace))
    c = cmp.compare(analyze(before).frame, analyze(after).frame)
    r = row(c.kernels, "ncclDevKernel_AllReduce_Sum_f32_RING_LL")
    # all-reduce over 4 ranks: bus bytes = S·2(n − 1)/n = 1.5·S; S = 1024·1024·4 B -> 6,291,456 B,
    # 512·1024·4 B -> 3,145,728 B; no DRAM row (the link row stands where it would)
    assert (r["bytes_link_before"], r["bytes_link_after"], r["delta_bytes_link"]) == (
        6_291_456, 3_145_728, -3_145_728)
    assert pd.isna(r["bytes_dram_before"]) and pd.isna(r["bytes_dram_after"])
    assert (r["bound_link_before"], r["bound_link_after"], r["bound_link_changed"]) == (
        "memory", "memory", False)
    gemm = row(c.kernels, "ampere_sgemm_64x64_nn")
    # other kernels keep DRAM only
    assert pd.isna(gemm["bytes_link_before"]) and gemm["bytes_dram_before"] > 0
    text = cmp.render(c)
    assert "LINK bytes: 6 MiB -> 3 MiB" in text  # nsroof.units.human_bytes: 6,291,456 B = 6 MiB
    line = next(x for x in text.splitlines() if "ncclDevKernel" in x)
    assert "6 MiB -> 3 MiB" in line and "memory->memory link" in line
    # the range's memory-bound share counts the link-bound collective's time as it counts the DRAM-bound
    # 64×64 GEMM: (20 + 20) / 40 µs before, (10 + 20) / 30 after = 100% (reading the DRAM rows only it was
    # 20/40 and 20/30)
    assert c.ranges is not None
    top = c.ranges.iloc[0]
    assert gemm["bound_dram_before"] == "memory"
    assert (top["memory_bound_share_before"], top["memory_bound_share_after"]) == (1.0, 1.0)
