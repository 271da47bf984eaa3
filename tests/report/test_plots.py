"""The roofline chart: plotted data equals the report's numbers, roofs and ridges come from the
report's ceilings, unplottable kernels are listed, and renders are deterministic."""

from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

from nsroof.errors import NsroofError
from nsroof.report import plots
from tests._cli import invoke, nsroof_process
from tests.report.report_frames import five_kernels, kernel, make_report


@pytest.fixture(scope="module")
def report() -> pd.DataFrame:
    return five_kernels()


@pytest.fixture(scope="module")
def data(report: pd.DataFrame) -> pd.DataFrame:
    return plots.chart_data(report)


def _point(data: pd.DataFrame, function: str, level: str) -> pd.Series:
    row = data[(data["function"] == function) & (data["level"] == level)]
    assert len(row) == 1
    return row.iloc[0]


def _texts(fig: object) -> list[str]:
    from matplotlib.text import Text

    return [t.get_text() for t in fig.findobj(Text)]  # type: ignore[attr-defined]


# ----------------------------------------------------------------------------- plotted coordinates


def test_points_are_the_reports_intensity_and_achieved_flop_per_s(report: pd.DataFrame,
                                                                  data: pd.DataFrame) -> None:
    # gemm: 10 GFLOP in 1 ms = 1e13 FLOP/s at every level; I = 10e9 / 1e9 = 10 (DRAM), / 2e9 = 5 (L2),
    # / 5e9 = 2 (L1)
    for level, x in (("dram", 10.0), ("l2", 5.0), ("l1", 2.0)):
        p = _point(data, "gemm", level)
        assert p["x_intensity"] == pytest.approx(x)
        assert p["y_flop_per_s"] == pytest.approx(1e13)
        assert bool(p["plotted"])
    # and, row for row, every plotted point is the report's own number (no re-derivation)
    merged = data.merge(report[["source", "kernel_id", "level", "intensity", "achieved_flop_per_s"]],
                        on=["source", "kernel_id", "level"])
    plotted = merged[merged["plotted"]]
    assert len(plotted) == 8  # gemm 3 + softmax 2 (L2 unknown) + bogus 3
    np.testing.assert_array_equal(plotted["x_intensity"], plotted["intensity"])
    np.testing.assert_array_equal(plotted["y_flop_per_s"], plotted["achieved_flop_per_s"])


def test_kernels_ordered_longest_first_with_levels_in_report_order(data: pd.DataFrame) -> None:
    firsts = data.drop_duplicates("key")
    assert list(firsts["function"]) == ["gemm", "copy", "mystery", "softmax<float>", "bogus"]
    assert list(firsts["rank"]) == [1, 2, 3, 4, 5]
    assert list(data[data["function"] == "gemm"]["level"]) == ["dram", "l2", "l1"]


def test_marker_area_is_proportional_to_share_of_total_time(data: pd.DataFrame) -> None:
    # total = 1.0 + 0.5 + 0.2 + 0.2 + 0.1 = 2.0 ms; gemm 1.0 / 2.0 = 0.5 -> 0.5 * 2400 = 1200 pt²
    gemm, bogus = _point(data, "gemm", "dram"), _point(data, "bogus", "dram")
    assert gemm["time_share"] == pytest.approx(0.5)
    assert bogus["time_share"] == pytest.approx(0.05)
    assert gemm["marker_area_pt2"] == pytest.approx(1200.0)
    assert bogus["marker_area_pt2"] == pytest.approx(120.0)  # 0.05 * 2400
    assert gemm["marker_area_pt2"] / bogus["marker_area_pt2"] == pytest.approx(0.5 / 0.05)


def test_tiny_kernels_keep_a_visible_minimum_area() -> None:
    # 1 µs next to 1 s: share 1e-6 -> 0.0024 pt², raised to the 9 pt² floor
    df = make_report([kernel(0, "big", 1.0, 1e12, {"dram": 1e11, "l2": 1e11, "l1": 1e11}),
                      kernel(1, "tiny", 1e-6, 1e6, {"dram": 1e5, "l2": 1e5, "l1": 1e5})])
    assert _point(plots.chart_data(df), "tiny", "dram")["marker_area_pt2"] == plots.MIN_AREA_PT2


def test_time_share_is_over_the_whole_report_even_when_filtered(report: pd.DataFrame) -> None:
    d = plots.chart_data(report, nvtx="layer2")
    assert set(d["function"]) == {"mystery", "softmax<float>"}
    assert _point(d, "softmax<float>", "dram")["time_share"] == pytest.approx(0.1)  # 0.2 / 2.0 ms


def test_top_n_longest_kernels_are_labelled_once_on_their_first_plotted_level(data: pd.DataFrame) -> None:
    labels = data[data["label"] != ""]
    # copy (rank 2) and mystery (rank 3) have no point, so nothing carries their label
    assert list(zip(labels["label"], labels["level"], strict=True)) == [
        ("gemm", "dram"), ("softmax", "dram"), ("bogus", "dram")]
    top1 = plots.chart_data(five_kernels(), top=1)
    assert list(top1.loc[top1["label"] != "", "label"]) == ["gemm"]
    assert (plots.chart_data(five_kernels(), top=0)["label"] == "").all()


def test_above_roof_points_are_flagged(data: pd.DataFrame) -> None:
    # bogus: 3 GFLOP in 0.1 ms = 3e13 FLOP/s > 1.05 x 20e12
    assert data.loc[data["function"] == "bogus", "above_roof"].all()
    assert not data.loc[data["function"] == "gemm", "above_roof"].any()


# ---------------------------------------------------------------------------------------- filters


def test_level_filter_keeps_one_point_per_kernel(report: pd.DataFrame) -> None:
    d = plots.chart_data(report, level="l1")
    assert set(d["level"]) == {"l1"}
    assert len(d) == 5
    assert _point(d, "softmax<float>", "l1")["x_intensity"] == pytest.approx(0.25)  # 1e8 / 4e8


def test_precision_filter_and_bad_filters(report: pd.DataFrame) -> None:
    # copy has no FLOPs (precision ''), mystery unknown FLOPs (''): only the fp32 kernels remain
    d = plots.chart_data(report, precision="fp32")
    assert set(d["function"]) == {"gemm", "softmax<float>", "bogus"}
    assert plots.chart_data(report, precision="fp64").empty
    with pytest.raises(NsroofError, match="regular expression"):
        plots.chart_data(report, nvtx="(")
    with pytest.raises(NsroofError, match="unknown level"):
        plots.chart_data(report, level="l3")


def test_filters_that_match_nothing_give_an_empty_chart_that_says_so(report: pd.DataFrame) -> None:
    assert plots.chart_data(report, nvtx="no-such-range").empty
    assert "No kernel matches the filters" in _texts(plots.plot(report, nvtx="no-such-range"))


def test_a_frame_that_is_not_a_report_is_refused() -> None:
    with pytest.raises(NsroofError, match="lacks columns .*intensity"):
        plots.chart_data(pd.DataFrame({"kernel_id": [1], "level": ["dram"]}))


# ---------------------------------------------------------------------------- unknown kernels listed


def test_unplottable_kernels_are_listed_with_the_reason(data: pd.DataFrame) -> None:
    missing = plots.unplotted(data)
    assert list(missing["function"]) == ["copy", "mystery", "softmax<float>"]
    assert list(missing["partial"]) == [False, False, True]
    assert "no FLOPs" in missing.iloc[0]["reason"]
    assert "sm__sass_thread_inst_executed_op_ffma_pred_on.sum" in missing.iloc[1]["reason"]
    assert missing.iloc[2]["reason"] == "L2: no bytes at L2 (missing: lts__t_bytes.sum)"


def test_the_chart_lists_them_under_the_axes(report: pd.DataFrame) -> None:
    fig = plots.plot(report)
    listing = next(t for t in _texts(fig) if t.startswith("Not plotted"))
    # copy 0.5 ms + mystery 0.2 ms of 2.0 ms = 35.0 %
    assert "Not plotted: 2 kernels (35.0% of the run's time)" in listing
    assert "• #1 copy: no FLOPs" in listing and "• #2 mystery: no FLOP/s (missing: sm__sass" in listing
    assert "Points missing at some levels: 1 kernel (10.0% of the run's time)" in listing
    assert "#3 softmax" in listing


def test_long_listings_are_cut_with_a_count() -> None:
    ks = [kernel(i, f"k{i}", 1e-3, np.nan, {"dram": 1e6, "l2": 1e6, "l1": 1e6}, missing="flops")
          for i in range(14)]
    lines = plots._unplotted_lines(plots.unplotted(plots.chart_data(make_report(ks))))
    assert lines[0].startswith("Not plotted: 14 kernels (100.0%")
    assert lines[-1] == "  • … and 4 more (see the report's `missing` column)"


# ----------------------------------------------------------------------------------- roofs, ridges


def test_roofs_come_from_the_reports_ceiling_columns(report: pd.DataFrame) -> None:
    roofs = plots.roof_lines(report)
    got = {(r.kind, r.name): (r.value_min, r.value_max, r.source) for r in roofs.itertuples()}
    assert got == {
        ("compute", "fp32"): (20e12, 20e12, "spec:GPU-A"),
        ("bandwidth", "dram"): (2e12, 2e12, "spec:GPU-A"),
        ("bandwidth", "l2"): (5e12, 5e12, "spec:GPU-A"),
        ("bandwidth", "l1"): (20e12, 20e12, "spec:GPU-A"),
    }
    assert set(roofs["ceiling_set"]) == {0}


def test_ridges_are_the_reports_ridge_column(report: pd.DataFrame) -> None:
    ridges = plots.ridge_points(report)
    # 20e12 / 20e12 = 1 (L1), 20e12 / 5e12 = 4 (L2), 20e12 / 2e12 = 10 (DRAM)
    assert list(ridges["x_ridge"]) == [1.0, 4.0, 10.0]
    assert list(ridges["level"]) == ["l1", "l2", "dram"]
    assert (ridges["y_peak_flop_per_s"] == 20e12).all()


def test_each_roof_is_labelled_with_value_and_source(report: pd.DataFrame) -> None:
    texts = _texts(plots.plot(report))
    for label in ("fp32 20 TFLOP/s · spec:GPU-A", "DRAM 2 TB/s · spec:GPU-A", "L2 5 TB/s · spec:GPU-A",
                  "L1 20 TB/s · spec:GPU-A"):
        assert label in texts


def test_one_roof_set_per_distinct_ceiling() -> None:
    gpu_b = {"device": "GPU-B", "peak_flop_per_s": 60e12,
             "bandwidth": {"dram": 3e12, "l2": 10e12, "l1": 30e12}, "ceiling_source": "spec:GPU-B"}
    df = make_report([kernel(0, "gemm", 1e-3, 10e9, {"dram": 1e9, "l2": 2e9, "l1": 5e9}),
                      kernel(1, "gemm", 1e-3, 10e9, {"dram": 1e9, "l2": 2e9, "l1": 5e9}, machine=gpu_b,
                             source="rank1.csv")])
    roofs = plots.roof_lines(df)
    assert len(roofs) == 8  # (1 compute + 3 bandwidth) x 2 devices
    assert sorted(set(zip(roofs["ceiling_set"], roofs["device"], strict=True))) == [(0, "GPU-A"),
                                                                                    (1, "GPU-B")]
    assert set(plots.ridge_points(df)["x_ridge"]) == {1.0, 4.0, 10.0, 2.0, 6.0, 20.0}  # 60/30, 60/10, 60/3
    # two devices: one panel each, against its own roofs only (no roof set of the other device drawn)
    fig = plots.plot(df)
    assert len(fig.axes) == 2
    first, second = (_texts_of(ax) for ax in fig.axes)
    assert "fp32 20 TFLOP/s · spec:GPU-A" in first and not any("GPU-B" in s for s in first)
    assert "fp32 60 TFLOP/s · spec:GPU-B" in second and not any("GPU-A" in s for s in second)
    assert any(s.startswith("roofs: GPU-B · spec:GPU-B") for s in second)


def _texts_of(ax: Any) -> list[str]:
    return [a.get_text().replace("\n", " ") for a in ax.findobj(lambda a: hasattr(a, "get_text"))
            if a.get_text()]


def test_roofs_measured_per_kernel_are_drawn_as_their_range() -> None:
    # ncu roofs at each kernel's profiled clock: 19 and 20 TFLOP/s under one source -> one roof, a range
    src = "compute=ncu:sm__inst_executed_pipe_fma.peak_sustained; memory=ncu:dram__bytes.sum.peak_sustained"
    m1 = {**dict(make_machine(19e12)), "ceiling_source": src}
    m2 = {**dict(make_machine(20e12)), "ceiling_source": src}
    df = make_report([kernel(0, "a", 1e-3, 1e9, {"dram": 1e8, "l2": 1e8, "l1": 1e8}, machine=m1),
                      kernel(1, "b", 1e-3, 1e9, {"dram": 1e8, "l2": 1e8, "l1": 1e8}, machine=m2)])
    roofs = plots.roof_lines(df)
    comp = roofs[roofs["kind"] == "compute"].iloc[0]
    assert (comp["value_min"], comp["value_max"], comp["n_kernels"]) == (19e12, 20e12, 2)
    assert comp["source"] == "ncu:sm__inst_executed_pipe_fma.peak_sustained"
    assert set(roofs.loc[roofs["kind"] == "bandwidth", "source"]) == {"ncu:dram__bytes.sum.peak_sustained"}
    assert set(roofs["family"]) == {"ncu"} and set(roofs["ceiling_set"]) == {0}  # one ceiling, not two
    texts = _texts(plots.plot(df))
    assert "fp32 19–20 TFLOP/s · ncu" in texts
    assert any(t.replace("\n", " ").startswith("roofs: GPU-A · ncu (per kernel, at the profiled clock)")
               for t in texts)


def make_machine(peak: float) -> dict[str, object]:
    return {"device": "GPU-A", "peak_flop_per_s": peak, "bandwidth": {"dram": 2e12, "l2": 5e12, "l1": 20e12}}


def test_source_family_groups_the_roofs_of_one_ceiling() -> None:
    assert plots.source_family(
        "ncu:2 × sm__sass_thread_inst_executed_op_ffma_pred_on.sum.peak_sustained") == "ncu"
    assert plots.source_family("spec:RTX 3070#simt_flop_per_s.fp32") == "spec:RTX 3070"
    assert plots.source_family("measured:h100.json") == "measured:h100.json"


def test_a_report_without_ceilings_says_so() -> None:
    no_roofs = {"device": "", "peak_flop_per_s": np.nan,
                "bandwidth": {"dram": np.nan, "l2": np.nan, "l1": np.nan}, "ceiling_source": "unknown"}
    df = make_report([kernel(0, "gemm", 1e-3, 10e9, {"dram": 1e9, "l2": 2e9, "l1": 5e9}, machine=no_roofs)])
    assert plots.roof_lines(df).empty and plots.ridge_points(df).empty
    d = plots.chart_data(df)
    assert d["plotted"].all()  # the points still have coordinates: intensity and FLOP/s need no roof
    assert any(t.startswith("No roofs: the report") for t in _texts(plots.plot(df)))


def test_split_ceiling_source() -> None:
    assert plots.split_ceiling_source("spec:H100 SXM") == ("spec:H100 SXM", "spec:H100 SXM")
    assert plots.split_ceiling_source("compute=ncu:x; memory=spec:A100") == ("ncu:x", "spec:A100")


def test_short_names_keep_the_distinguishing_tail() -> None:
    # 42 characters cut to 32: 16 of the head, '…', 15 of the tail (names.kernel_names.fit_name)
    assert plots.short_name("void at::native::vectorized_elementwise_kernel<4, float>(int, float*)") \
        == "at::native::vect…mentwise_kernel"
    assert plots.short_name("softmax<float>") == "softmax"
    assert plots.short_name("<lambda>") == "<lambda>"


# ------------------------------------------------------------------------------ figure and output


def test_draws_into_a_given_axes(report: pd.DataFrame) -> None:
    from matplotlib.figure import Figure

    fig = Figure(figsize=(6, 4))
    ax = fig.add_subplot()
    assert plots.plot(report, ax=ax, level="dram") is fig
    assert ax.get_xscale() == "log" and ax.get_yscale() == "log"
    # 3 DRAM points (gemm, softmax, bogus) in one scatter collection, at the report's coordinates
    offsets = np.concatenate([c.get_offsets() for c in ax.collections if len(c.get_offsets()) == 3])
    assert sorted(map(tuple, np.asarray(offsets).tolist())) == [(1.0, 5e11), (3.0, 3e13), (10.0, 1e13)]


def test_axes_cover_every_point_and_roof(report: pd.DataFrame) -> None:
    fig = plots.plot(report)
    ax = fig.axes[0]
    (x0, x1), (y0, y1) = ax.get_xlim(), ax.get_ylim()
    d = plots.chart_data(report)
    p = d[d["plotted"]]
    assert x0 < p["x_intensity"].min() and p["x_intensity"].max() < x1
    assert y0 < p["y_flop_per_s"].min() and max(p["y_flop_per_s"].max(), 20e12) < y1


def test_empty_report_still_renders(tmp_path: Path) -> None:
    empty = five_kernels().iloc[0:0]
    out = plots.save(plots.plot(empty), tmp_path / "empty.svg")
    assert "Hierarchical roofline: 0 kernels" in out.read_text()
    assert "The report has no kernels" in out.read_text()


def test_png_and_svg_are_written(report: pd.DataFrame, tmp_path: Path) -> None:
    fig = plots.plot(report)
    png = plots.save(fig, tmp_path / "chart.png")
    svg = plots.save(fig, tmp_path / "chart.svg")
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    # no timestamp in PNGs either
    assert plots.save(fig, tmp_path / "again.png").read_bytes() == png.read_bytes()
    text = svg.read_text()
    assert text.lstrip().startswith("<?xml") and "<svg" in text and "<path" in text
    assert "gemm" in text  # svg.fonttype none: labels stay text
    assert [p.name for p in tmp_path.iterdir()] and not list(tmp_path.glob(".*.tmp"))
    with pytest.raises(NsroofError, match="use .png, .svg or .pdf"):
        plots.save(fig, tmp_path / "chart.jpg")


def test_two_renders_give_identical_svg(report: pd.DataFrame, tmp_path: Path) -> None:
    a = plots.save(plots.plot(report), tmp_path / "a.svg").read_bytes()
    b = plots.save(plots.plot(report.sample(frac=1.0, random_state=3)), tmp_path / "b.svg").read_bytes()
    assert a == b  # same report, rows shuffled: same bytes (stable ordering, fixed ids, no date)
    assert b"<dc:date>" not in a
    assert plots.to_svg(plots.plot(report), salt="x") != plots.to_svg(plots.plot(report), salt="y")


# -------------------------------------------------------------------------------------------- CLI


_nsroof, _invoke = nsroof_process, invoke


def test_cli_writes_png_and_svg_and_refuses_bad_input(repo: Path, report: pd.DataFrame,
                                                      tmp_path: Path) -> None:
    from nsroof.report import parquet

    path = parquet.write(report, tmp_path / "report.parquet", inputs=[])
    r = _nsroof("plot", str(path), "-o", str(tmp_path / "c.svg"), "--top", "3")
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == (f"wrote {tmp_path / 'c.svg'}: 5 kernels, 8 points; "
                                "2 kernels not plotted (listed under the chart)")
    code, out, _ = _invoke("plot", str(path), "-o", str(tmp_path / "c2.svg"), "--top", "3")
    assert code == 0
    # same bytes, other process
    assert (tmp_path / "c.svg").read_bytes() == (tmp_path / "c2.svg").read_bytes()

    code, out, _ = _invoke("plot", str(path), "-o", str(tmp_path / "l1.png"), "--level", "l1", "--nvtx",
                           "layer")
    assert code == 0 and "4 kernels, 2 points" in out  # gemm, softmax at L1; copy, mystery none

    r = _nsroof("plot", str(tmp_path / "missing.parquet"), "-o", str(tmp_path / "x.png"))
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert r.stderr == (f"nsroof: error: {tmp_path / 'missing.parquet'}: no such file or directory — give a "
                        "report written by `nsroof analyze EXPORT -o report.parquet`\n")
    for args, message in (
        ((str(repo / "pyproject.toml"), "-o", str(tmp_path / "x.png")), "not a readable Parquet report"),
        ((str(path), "-o", str(tmp_path / "x.gif")), "cannot write a chart as '.gif'"),
        ((str(path), "-o", str(tmp_path / "x.png"), "--nvtx", "[a-"), "not a valid regular expression"),
    ):
        code, _, err = _invoke("plot", *args)
        assert code == 2
        assert err.startswith("nsroof: error: ") and message in err
        assert "Traceback" not in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "x.png").exists() and not (tmp_path / "x.gif").exists()


def test_cli_refuses_a_parquet_file_that_is_not_a_report(tmp_path: Path) -> None:
    path = tmp_path / "other.parquet"
    pd.DataFrame({"a": [1, 2]}).to_parquet(path)
    code, _, err = _invoke("plot", str(path), "-o", str(tmp_path / "x.png"))
    assert code == 2
    assert re.search(r"not an nsroof report: lacks the columns source, kernel_id", err)


def test_ridge_marker_positions_match_ridges(report: pd.DataFrame) -> None:
    fig = plots.plot(report)
    ax = fig.axes[0]
    diamonds = [c for c in ax.collections if len(c.get_offsets()) == 3 and c.get_offsets()[0][1] == 20e12]
    assert diamonds, "ridge markers drawn"
    assert sorted(x for x, _ in np.asarray(diamonds[0].get_offsets()).tolist()) == [1.0, 4.0, 10.0]
    assert math.isclose(float(np.asarray(diamonds[0].get_offsets())[0][1]), 20e12)


def test_a_cpus_matmul_roof_is_named_matrix_never_tensor_cores() -> None:
    # the report's precision "tensor" (the dense peak of the op's dtype) on a CPU profile is the matmul peak
    # nsroof measure timed: a CPU has no tensor cores; a GPU report keeps the name
    cpu = {**make_machine(2e12), "device": "Intel(R) Xeon(R) Processor",
           "ceiling_source": "measured:cpu.json"}
    bytes_ = {"dram": 1e8, "l2": 1e8, "l1": 1e8}
    on_cpu = make_report([kernel(0, "aten::mm", 1e-3, 1e9, bytes_, machine=cpu, precision="tensor",
                                 kind="cpu_op")])
    on_gpu = make_report([kernel(0, "gemm", 1e-3, 1e9, bytes_, precision="tensor")])
    titles = {name: dict(zip(plots.roof_lines(df)["name"], plots.roof_lines(df)["title"], strict=True))
              for name, df in (("cpu", on_cpu), ("gpu", on_gpu))}
    assert titles["cpu"] == {"tensor": "matrix", "dram": "DRAM", "l2": "L2", "l1": "L1"}
    assert titles["gpu"]["tensor"] == "tensor"
    assert "matrix 2 TFLOP/s · measured:cpu.json" in _texts(plots.plot(on_cpu))
    assert set(on_cpu["precision"]) == {"tensor"}  # the Parquet column: one name on both
