"""Charts and HTML pages from real Nsight Compute exports (../shared/fixtures; skipped when absent),
through the real pipeline: what is drawn is the report's own numbers."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from nsroof.report import html, plots
from nsroof.schema import kernel_key
from tests.report.page_parse import Page

AVERY = "converted/averyclapp__profile_output.raw_base.csv"  # A10G SGEMM variants, ncu roofs, no L2 bytes
NVTX = "converted/nsighttraining__manual_nvtx.raw_base.csv"  # RTX 3070, NVTX ranges, no FLOP counters


@pytest.fixture(scope="module")
def avery(shared_fixtures: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[pd.DataFrame, Path]:
    from nsroof.pipeline import analyze

    report = analyze([shared_fixtures / AVERY])
    path = report.write(tmp_path_factory.mktemp("avery") / "report.parquet")
    return report.frame, path


class _Result:
    def __init__(self, returncode: int, stdout: str, stderr: str) -> None:
        self.returncode, self.stdout, self.stderr = returncode, stdout, stderr


def _nsroof(*args: str) -> _Result:
    """The CLI in-process (click's runner): same commands, no interpreter start-up per call."""
    from click.testing import CliRunner

    from nsroof.cli import cli

    r = CliRunner().invoke(cli, list(args))
    return _Result(r.exit_code, r.stdout,
                   r.stderr + (repr(r.exception) if r.exception and r.exit_code != 2 else ""))


def test_png_svg_and_html_from_a_real_export(avery: tuple[pd.DataFrame, Path], tmp_path: Path) -> None:
    _, path = avery
    for name in ("chart.png", "chart.svg"):
        r = _nsroof("plot", str(path), "-o", str(tmp_path / name))
        assert r.returncode == 0, r.stderr
        # 4 kernels x (DRAM, L1): the export has no L2 byte counter, so no L2 points
        assert "4 kernels, 8 points" in r.stdout
    assert (tmp_path / "chart.png").read_bytes()[:4] == b"\x89PNG"
    assert "warptiling" in (tmp_path / "chart.svg").read_text()
    r = _nsroof("report", str(path), "-o", str(tmp_path / "report.html"))
    assert r.returncode == 0, r.stderr
    page = Page((tmp_path / "report.html").read_text())
    assert sorted(page.column("kernel")) == ["one_blocktiling", "two_blocktiling", "vectorized_blocktiling",
                                             "warptiling"]
    assert page.tags["svg"] == 4  # all levels, DRAM, L2 (no points: its chart lists why), L1


def test_real_points_and_roofs_are_the_reports_numbers(avery: tuple[pd.DataFrame, Path]) -> None:
    frame, _ = avery
    data = plots.chart_data(frame)
    shown = data[data["plotted"]].merge(frame, on=["source", "kernel_id", "level"])
    assert len(shown) == 8
    np.testing.assert_array_equal(shown["x_intensity"], shown["intensity"])
    np.testing.assert_array_equal(shown["y_flop_per_s"], shown["achieved_flop_per_s"])
    assert set(data.loc[~data["plotted"], "level"]) == {"l2"}
    roofs = plots.roof_lines(frame)
    # ncu's own roofs, plus the datasheet L2 roof at each kernel's recorded clock (the export has no L2 peak)
    assert set(roofs["family"]) == {"ncu", "spec:A10G @ profiled clock"}
    assert set(roofs.loc[roofs["family"] != "ncu", "name"]) == {"l2"}
    comp = roofs[roofs["kind"] == "compute"].iloc[0]
    # ncu's roof at each kernel's clock: the chart spans exactly the report's min..max
    assert comp["value_min"] == frame["peak_flop_per_s"].min()
    assert comp["value_max"] == frame["peak_flop_per_s"].max()
    dram = roofs[(roofs["kind"] == "bandwidth") & (roofs["name"] == "dram")].iloc[0]
    at_dram = frame[frame["level"] == "dram"]["bandwidth_bytes_per_s"]
    assert (dram["value_min"], dram["value_max"]) == (at_dram.min(), at_dram.max())
    ridges = plots.ridge_points(frame)
    assert set(ridges["level"]) == {"dram", "l2", "l1"}  # L2: ncu compute roof over the datasheet L2 roof


def test_real_nvtx_groups_and_unplotted_listing(shared_fixtures: Path) -> None:
    from nsroof.pipeline import analyze

    report = analyze([shared_fixtures / NVTX])
    frame = report.frame
    page = Page(html.render(frame, metadata=report.metadata, with_charts=False))
    assert len(page.rows) == 3
    assert sorted(g.split(" — ")[0] for g in page.groups) == ["run_test/check_results", "run_test/daxpy",
                                                             "run_test/init_data"]
    # no FLOP counters in this export: nothing to place, and the listing says which metrics were missing
    missing = plots.unplotted(plots.chart_data(frame))
    assert len(missing) == 3 and not missing["partial"].any()
    assert all("sm__sass_thread_inst_executed_op_ffma_pred_on.sum" in r for r in missing["reason"])
    roofs = plots.roof_lines(frame)
    assert "spec:RTX 3070 @ profiled clock" in set(roofs["family"])  # the export records its DRAM clock


def test_two_devices_in_one_report_get_two_roof_sets(shared_fixtures: Path) -> None:
    from nsroof.pipeline import analyze

    frame = analyze([shared_fixtures / AVERY, shared_fixtures / NVTX]).frame
    roofs = plots.roof_lines(frame)
    sets = roofs.drop_duplicates("ceiling_set")[["device", "family"]]
    # the A10G's own ncu roofs and its datasheet L2 roof (the export has no L2 peak), the 3070's
    # datasheet roofs
    assert sorted(map(tuple, sets.to_numpy().tolist())) == [
        ("NVIDIA A10G", "ncu"), ("NVIDIA A10G", "spec:A10G @ profiled clock"),
        ("NVIDIA GeForce RTX 3070", "spec:RTX 3070 @ profiled clock")]
    # one panel per device: the A10G's two roof sets tagged [1] and [2], the 3070's one set untagged
    a10g, rtx = ([t.get_text().replace("\n", " ") for t in ax.findobj(lambda a: hasattr(a, "get_text"))]
                 for ax in plots.plot(frame).axes)
    assert any(t.startswith("[1] roofs: NVIDIA A10G · ncu") for t in a10g)
    assert any(t.startswith("[2] roofs: NVIDIA A10G · spec:A10G @ profiled clock") for t in a10g)
    assert any(t.startswith("roofs: NVIDIA GeForce RTX 3070 · spec:RTX 3070 @ profiled clock") for t in rtx)


def test_the_packaged_example(example_csv: Path, tmp_path: Path) -> None:
    # a tracked file: missing is a failure, never a skip
    assert example_csv.is_file(), f"{example_csv} is missing (tracked in git: restore it)"
    from nsroof.pipeline import analyze

    report = analyze([example_csv])
    path = report.write(tmp_path / "example.parquet")
    for name in ("example.png", "example.svg", "example.html"):
        cmd = "report" if name.endswith(".html") else "plot"
        r = _nsroof(cmd, str(path), "-o", str(tmp_path / name))
        assert r.returncode == 0, r.stderr
    n = kernel_key(report.frame).nunique()
    assert len(Page((tmp_path / "example.html").read_text()).rows) == n
    data = plots.chart_data(report.frame)
    shown = data[data["plotted"]].merge(report.frame, on=["source", "kernel_id", "level"])
    np.testing.assert_array_equal(shown["x_intensity"], shown["intensity"])


def test_a_dataset_folder_of_several_exports(shared_fixtures: Path, tmp_path: Path) -> None:
    dataset = tmp_path / "dataset"
    r = _nsroof("analyze", str(shared_fixtures / AVERY), str(shared_fixtures / NVTX), "-o", str(dataset))
    assert r.returncode == 0, r.stderr
    r = _nsroof("report", str(dataset), "-o", str(tmp_path / "page.html"))
    assert r.returncode == 0, r.stderr
    page = Page((tmp_path / "page.html").read_text())
    assert len(page.rows) == 4 + 3
    text = (tmp_path / "page.html").read_text()
    # each part file holds its own input: the page lists both
    assert ("averyclapp__profile_output.raw_base.csv" in text
            and "nsighttraining__manual_nvtx.raw_base.csv" in text)


def test_the_ledger_join_shows_excess_traffic(data_dir: Path, shared_fixtures: Path) -> None:
    from nsroof.pipeline import analyze

    mapping = data_dir / "ledger" / "gardenia_gemm.yaml"
    frame = analyze([shared_fixtures / "csv" / "gardenia__gemm.csv"], ledger=mapping).frame
    page = Page(html.render(frame, with_charts=False))
    assert html.ledger_ran(frame)
    by_kernel = dict(zip(page.column("kernel"), page.column("excess traffic"), strict=True))
    gemm = frame[frame["function"] == "gemm_v0"].iloc[0]
    assert by_kernel["gemm_v0"] == f"{gemm['excess_traffic']:.2f}×"  # measured DRAM bytes / compulsory bytes
    assert "gemm" in page.column("ledger op")[0]
    # no ceilings in this export (no device name): the ledger's ideal time, hence headroom, is unknown
    assert page.column("headroom") == ["—"] * 3
