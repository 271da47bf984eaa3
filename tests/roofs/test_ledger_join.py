"""The measured-vs-compulsory join: mapping files, shapes from NVTX markers, the ledger columns,
the gain table, and a real export from ../shared/fixtures."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest

from nsroof.roofs import ledger_join as lj
from nsroof.schema import COLUMNS, FIELD_BY_NAME

ADDMM = ("aten::addmm, seq = 5, op_id = 72, sizes = [[256], [64, 128], [128, 256]], "
         "input_op_ids = [(0, 0), (1, 0), (2, 0)]")
MM = "aten::mm, seq = 7, op_id = 80, sizes = [[32, 64], [64, 16]], input_op_ids = []"
PEAK, BW = 1e12, 1e11  # round roofs so the arithmetic below stays readable


def kernel_rows(kernel_id: int, name: str, *, duration_s: float, flops: float, dram_bytes: float,
                nvtx_path: str = "", op: str = "", input_shapes: str = "",
                launches: int = 1) -> list[dict[str, Any]]:
    """One kernel as the report holds it: a row per level, the same identity and FLOPs on each."""
    rows = []
    for level, nbytes in (("dram", dram_bytes), ("l2", 2 * dram_bytes), ("l1", 4 * dram_bytes)):
        row: dict[str, Any] = {c: (np.nan if pa.types.is_floating(FIELD_BY_NAME[c].type) else None)
                               for c in COLUMNS}
        row.update(source="t.csv", kernel_id=kernel_id, launches=launches, kernel_name=name, function=name,
                   nvtx_path=nvtx_path, op=op, input_shapes=input_shapes, device="", level=level,
                   duration_s=duration_s, flops=flops, bytes=nbytes, peak_flop_per_s=PEAK,
                   bandwidth_bytes_per_s=BW if level == "dram" else 10 * BW, missing="",
                   ledger_op="", expected_flops=np.nan, min_bytes=np.nan, flop_ratio=np.nan,
                   excess_traffic=np.nan, ideal_time_s=np.nan, headroom=np.nan)
        rows.append(row)
    return rows


@pytest.fixture()
def report() -> pd.DataFrame:
    rows = (
        kernel_rows(0, "sgemm_128x64_nn", duration_s=4.294967296e-3, flops=3_221_225_472,
                    dram_bytes=50_331_648, nvtx_path="train/step")
        + kernel_rows(1, "ampere_sgemm_32x32", duration_s=1e-4, flops=4_210_688, dram_bytes=460_800,
                      nvtx_path=f"train/step/{ADDMM}")
        + kernel_rows(2, "cutlass_hgemm", duration_s=2e-6, flops=65_536, dram_bytes=7_168,
                      nvtx_path=f"train/{MM}", launches=3)
        + kernel_rows(3, "elementwise_kernel", duration_s=1e-3, flops=0, dram_bytes=1e6,
                      nvtx_path="train/step")
        + kernel_rows(4, "cutlass_hgemm", duration_s=1e-6, flops=1.0, dram_bytes=1.0,
                      nvtx_path="train/aten::mm, seq = 9")
        + kernel_rows(5, "bmm_kernel", duration_s=1e-5, flops=0, dram_bytes=1.0, op="aten::bmm",
                      input_shapes="[[4, 8, 16], [4, 16, 32]]")
    )
    return pd.DataFrame(rows, columns=COLUMNS)


@pytest.fixture()
def joined(report: pd.DataFrame, data_dir: Path) -> pd.DataFrame:
    return lj.apply(report, lj.load_mapping(data_dir / "ledger" / "mapping.yaml"))


def dram(frame: pd.DataFrame, kernel_id: int) -> pd.Series:
    return frame[(frame["kernel_id"] == kernel_id) & (frame["level"] == "dram")].iloc[0]


class TestApply:
    def test_kernel_name_rule(self, joined: pd.DataFrame) -> None:
        r = dram(joined, 0)
        assert r["ledger_op"] == "gemm(m=1024, n=1024, k=1024, dtype=fp32)"
        assert r["expected_flops"] == 2_147_483_648  # 2·1024³
        assert r["min_bytes"] == 12_582_912  # 3·1024²·4 B
        assert r["flop_ratio"] == 1.5  # measured 3,221,225,472 / 2,147,483,648
        assert r["excess_traffic"] == 4.0  # measured 50,331,648 / 12,582,912
        # compute 2,147,483,648 / 1e12 = 2.147 ms > memory 12,582,912 / 1e11 = 0.126 ms
        assert r["ideal_time_s"] == pytest.approx(2.147483648e-3, rel=1e-15)
        assert r["headroom"] == pytest.approx(2.0, rel=1e-15)  # 4.294967296 ms / 2.147483648 ms

    def test_every_level_row_of_a_kernel_carries_the_same_values(self, joined: pd.DataFrame) -> None:
        k0 = joined[joined["kernel_id"] == 0]
        for col in lj.LEDGER_COLUMNS:
            assert k0[col].nunique(dropna=False) == 1, col
        # excess traffic is DRAM bytes / compulsory bytes even on the l2 and l1 rows
        assert (k0["excess_traffic"] == 4.0).all()

    def test_shape_from_emit_nvtx_marker(self, joined: pd.DataFrame) -> None:
        r = dram(joined, 1)
        assert r["ledger_op"] == "gemm-bias(m=64, n=256, k=128, bias_elements=256, dtype=fp32)"
        assert r["expected_flops"] == 4_210_688  # 2·64·256·128 + 64·256 bias adds
        assert r["min_bytes"] == 230_400  # (64·128 + 128·256 + 64·256 + 256)·4 B
        assert r["excess_traffic"] == 2.0  # 460,800 / 230,400
        assert r["flop_ratio"] == 1.0

    def test_aten_formula_and_launches(self, joined: pd.DataFrame) -> None:
        r = dram(joined, 2)
        assert r["ledger_op"] == "gemm(m=32, n=16, k=64, dtype=fp16)"
        assert r["expected_flops"] == 3 * 65_536  # 2·32·16·64, × 3 launches merged into the row
        assert r["min_bytes"] == 3 * 7_168  # (32·64 + 64·16 + 32·16)·2 B, × 3
        # memory 21,504 / 1e11 = 215 ns > compute 196,608 / 1e12 = 197 ns
        assert r["ideal_time_s"] == pytest.approx(2.1504e-7, rel=1e-12)

    def test_input_shapes_column(self, joined: pd.DataFrame) -> None:
        r = dram(joined, 5)
        assert r["ledger_op"] == "bmm(m=8, n=32, k=16, batch=4, dtype=bf16)"
        assert r["expected_flops"] == 2 * 4 * 8 * 32 * 16  # 32,768

    def test_unmatched_kernels_keep_nan(self, joined: pd.DataFrame) -> None:
        r = dram(joined, 3)
        assert r["ledger_op"] == ""
        assert all(math.isnan(r[c]) for c in lj.LEDGER_COLUMNS[1:])
        assert r["missing"] == ""

    def test_matched_but_shapeless_says_why(self, joined: pd.DataFrame) -> None:
        r = dram(joined, 4)
        assert math.isnan(r["expected_flops"]) and r["ledger_op"] == ""
        assert r["missing"] == "ledger: no recorded sizes for aten::mm"

    def test_coverage(self, joined: pd.DataFrame) -> None:
        assert lj.coverage(joined) == (4, 6)  # kernels 0, 1, 2, 5 evaluated; 3 unmatched; 4 without sizes
        assert joined.attrs["ledger"]["matched"] == 4

    def test_input_is_not_modified(self, report: pd.DataFrame, data_dir: Path) -> None:
        before = report.copy()
        lj.apply(report, lj.load_mapping(data_dir / "ledger" / "mapping.yaml"))
        pd.testing.assert_frame_equal(report, before)

    def test_column_dtypes(self, joined: pd.DataFrame) -> None:
        for col in lj.LEDGER_COLUMNS[1:]:
            assert joined[col].dtype == "float64"

    def test_missing_roof_uses_the_given_machine(self, report: pd.DataFrame, data_dir: Path) -> None:
        from nsroof.roofs.machines import Machine

        report["peak_flop_per_s"] = np.nan  # a kernel with no FLOP counters has no precision roof
        m = Machine("test", peak_flop_per_s={"fp32": 2e12}, bandwidth_bytes_per_s={"dram": 1e11})
        r = dram(lj.apply(report, lj.load_mapping(data_dir / "ledger" / "mapping.yaml"), machine=m), 0)
        assert r["ideal_time_s"] == pytest.approx(2_147_483_648 / 2e12)  # gemm's roof: matmul fp32


class TestRuleWarnings:
    """A rule that matches a kernel but cannot be evaluated on it is said once, in
    attrs["ledger"]["warnings"]: the mapping file and line of the rule, how many kernels, the first one, the
    expression, why."""

    def test_one_warning_per_failing_rule(self, joined: pd.DataFrame, data_dir: Path) -> None:
        # kernel 4's marker 'aten::mm, seq = 9' records no sizes: rule 3 (formula aten, line 13) fails on it
        (warning,) = joined.attrs["ledger"]["warnings"]
        path = str(data_dir / "ledger" / "mapping.yaml")
        assert warning.startswith(f"{path}:13: rule 3 (aten) matched 1 kernel(s) "
                                  "but could not evaluate them; ")
        assert "first: cutlass_hgemm (t.csv kernel 4): no recorded sizes for aten::mm" in warning
        assert "\n" not in warning

    def test_the_expression_that_failed_and_the_sizes_it_saw(self, report: pd.DataFrame,
                                                             tmp_path: Path) -> None:
        # gemm-bias written for addmm's three recorded inputs (bias, mat1, mat2) meets markers with two
        two_inputs = "aten::addmm, seq = 12, op_id = 5, sizes = [[64, 128], [128, 256]], input_op_ids = []"
        extra = pd.DataFrame(kernel_rows(6, "sgemm_a", duration_s=1e-5, flops=1.0, dram_bytes=1.0,
                                         nvtx_path=f"x/{two_inputs}")
                             + kernel_rows(7, "sgemm_b", duration_s=1e-5, flops=1.0, dram_bytes=1.0,
                                           nvtx_path=f"y/{two_inputs}"), columns=COLUMNS)
        p = tmp_path / "m.yaml"
        p.write_text("dtype: fp32\nrules:\n  - nvtx: 'aten::addmm'\n    formula: gemm-bias\n"
                     "    shape: {m: 'sizes[1][0]', k: 'sizes[1][1]', n: 'sizes[2][1]', "
                     "bias_elements: 'sizes[0][0]'}\n")
        frame = lj.apply(pd.concat([report, extra], ignore_index=True), lj.load_mapping(p))
        # kernel 1's marker has three inputs and evaluates; kernels 6 and 7 fail at n = sizes[2][1]
        assert lj.coverage(frame) == (1, 8)
        (warning,) = frame.attrs["ledger"]["warnings"]
        assert warning.startswith(f"{p}:3: rule 1 (gemm-bias) matched 2 kernel(s) "
                                  "but could not evaluate them; ")
        assert "first: sgemm_a (t.csv kernel 6): " in warning
        assert "n = sizes[2][1]: no input 2 in the recorded sizes [[64, 128], [128, 256]]" in warning
        # the per-kernel reason stays in `missing` too
        assert "ledger: n = sizes[2][1]: no input 2" in dram(frame, 7)["missing"]

    def test_no_warnings_when_every_match_evaluates(self, report: pd.DataFrame, data_dir: Path) -> None:
        frame = lj.apply(report[report["kernel_id"] != 4],
                         lj.load_mapping(data_dir / "ledger" / "mapping.yaml"))
        assert frame.attrs["ledger"]["warnings"] == []
        assert frame.attrs["ledger"]["matched"] == 4 and frame.attrs["ledger"]["kernels"] == 5

    def test_repo_mapping_on_the_shared_nvtx_export(self, shared_fixtures: Path, data_dir: Path) -> None:
        # the review's repro: mapping.yaml's gemm-bias rule reads addmm's bias at sizes[0]; this export's
        # marker records only mat1 and mat2, so it cannot be evaluated, and the relu marker has no sizes
        from nsroof.pipeline import analyze

        export = shared_fixtures / "synthetic" / "fixture_ncu2024_raw_nvtx_base.csv"
        frame = lj.apply(analyze(export).frame, lj.load_mapping(data_dir / "ledger" / "mapping.yaml"))
        assert lj.coverage(frame) == (0, 2)
        gemm_bias, aten = frame.attrs["ledger"]["warnings"]
        assert ":9: rule 2 (gemm-bias) matched 1 kernel(s)" in gemm_bias and "initRNG" in gemm_bias
        assert "n = sizes[2][1]: no input 2 in the recorded sizes [[64, 128], [128, 256]]" in gemm_bias
        assert ":13: rule 3 (aten) matched 1 kernel(s)" in aten and "no recorded sizes for aten::relu" in aten


class TestGainTable:
    def test_ranks_by_gain_not_duration(self, joined: pd.DataFrame) -> None:
        t = lj.gain_table(joined)
        kernels = t[t["kind"] == "kernel"].reset_index(drop=True)
        assert list(kernels["name"][:2]) == ["sgemm_128x64_nn", "ampere_sgemm_32x32"]
        top = kernels.iloc[0]
        assert top["gain_s"] == pytest.approx(4.294967296e-3 - 2.147483648e-3)
        # the 1 ms elementwise kernel has no formula: not ranked, however long it ran
        assert "elementwise_kernel" not in set(kernels["name"])
        assert (t["gain_s"].diff().dropna() <= 0).all()

    def test_nvtx_ranges_sum_their_kernels(self, joined: pd.DataFrame) -> None:
        t = lj.gain_table(joined).set_index(["kind", "name"])
        step = t.loc[("nvtx", "train/step")]
        # kernels 0 and 1 (and the addmm marker's range below it); the elementwise kernel is unmatched
        assert step["kernels"] == 2 and step["unmatched_kernels"] == 1
        gain_1 = 1e-4 - max(4_210_688 / PEAK, 230_400 / BW)
        assert step["gain_s"] == pytest.approx(2.147483648e-3 + gain_1)
        train = t.loc[("nvtx", "train")]
        assert train["kernels"] == 3  # 0, 1, 2; kernel 4 had no sizes, 3 no formula
        assert train["unmatched_kernels"] == 2
        assert train["launches"] == 1 + 1 + 3

    def test_empty_when_nothing_matched(self, report: pd.DataFrame) -> None:
        assert len(lj.gain_table(report)) == 0
        assert list(lj.gain_table(report).columns) == lj.GAIN_COLUMNS


class TestRealExport:
    """gardenia__gemm.csv: a naive fp32 GEMM on an A100 (see tests/data/ledger/gardenia_gemm.yaml)."""

    def test_gemm_against_its_ledger(self, shared_fixtures: Path, data_dir: Path) -> None:
        from nsroof.pipeline import analyze

        export = shared_fixtures / "csv" / "gardenia__gemm.csv"
        report = analyze(export, machine="a100-40gb")
        frame = lj.apply(report.frame, lj.load_mapping(data_dir / "ledger" / "gardenia_gemm.yaml"))
        assert lj.coverage(frame) == (3, 3)
        g = frame[(frame["function"] == "gemm_v0") & (frame["level"] == "dram")].iloc[0]
        assert g["ledger_op"] == "gemm(m=40960, n=40960, k=20480, dtype=fp32)"
        assert g["expected_flops"] == 68_719_476_736_000  # 2·40960·40960·20480
        assert g["min_bytes"] == 13_421_772_800  # (40960·20480 + 20480·40960 + 40960²)·4 B
        # dram__bytes.sum 4,394,965,922,944 / 13,421,772,800: the naive kernel moves 327× the compulsory bytes
        assert g["excess_traffic"] == pytest.approx(4_394_965_922_944 / 13_421_772_800, rel=1e-12)
        assert g["flop_ratio"] == pytest.approx(g["flops"] / 68_719_476_736_000, rel=1e-12)
        assert 1.0 <= g["flop_ratio"] < 1.01  # FFMA·2 = expected; the rest is index arithmetic
        # A100 fp32 roof at the 765 MHz the export recorded: 19.5e12 × 765 / 1410 = 10.58 TFLOP/s;
        # 68.72e12 / 10.58e12 = 6.495 s > 13.4e9 B / 1.555e12 B/s = 8.6 ms
        roof = 19.5e12 * 765 / 1410
        assert g["peak_flop_per_s"] == pytest.approx(roof, rel=1e-12)
        assert g["ideal_time_s"] == pytest.approx(68_719_476_736_000 / roof, rel=1e-12)
        assert g["headroom"] == pytest.approx(g["duration_s"] / g["ideal_time_s"], rel=1e-12)
        table = lj.gain_table(frame)
        assert table.iloc[0]["name"].startswith("void gemm_v0<float>")

    def test_analyze_cli_with_ledger(self, shared_fixtures: Path, data_dir: Path, tmp_path: Path) -> None:
        from click.testing import CliRunner

        from nsroof.cli import cli

        out = tmp_path / "r.parquet"
        result = CliRunner().invoke(cli, ["analyze", str(shared_fixtures / "csv" / "gardenia__gemm.csv"),
                                          "--machine", "a100-40gb", "--ledger",
                                          str(data_dir / "ledger" / "gardenia_gemm.yaml"), "-o", str(out)])
        assert result.exit_code == 0, result.output
        frame = pd.read_parquet(out)
        assert ((frame["min_bytes"].dropna() > 0).all()
                and frame["ledger_op"].astype(str).str.startswith("gemm").any())

    def test_emit_nvtx_markers_exported_by_ncu(self, shared_fixtures: Path, data_dir: Path) -> None:
        from nsroof.pipeline import analyze

        export = shared_fixtures / "synthetic" / "fixture_ncu2024_raw_nvtx_base.csv"
        frame = lj.apply(analyze(export).frame, lj.load_mapping(data_dir / "ledger" / "nvtx_markers.yaml"))
        k0 = frame[(frame["kernel_id"] == 0) & (frame["level"] == "dram")].iloc[0]
        assert "aten::addmm, seq = 12, op_id = 5, sizes = [[64, 128], [128, 256]]" in k0["nvtx_path"]
        assert k0["ledger_op"] == "gemm(m=64, n=256, k=128, dtype=fp32)"
        assert k0["expected_flops"] == 4_194_304  # 2·64·256·128
        assert k0["min_bytes"] == 229_376  # (64·128 + 128·256 + 64·256)·4 B
        assert k0["excess_traffic"] == pytest.approx(k0["bytes"] / 229_376, rel=1e-12)
        k1 = frame[(frame["kernel_id"] == 1) & (frame["level"] == "dram")].iloc[0]
        assert math.isnan(k1["expected_flops"])
        assert "ledger: no recorded sizes for aten::relu" in k1["missing"]


def test_aten_match_keeps_the_formula_roof_for_the_machine_fallback(report: pd.DataFrame,
                                                                    data_dir: Path) -> None:
    from nsroof.roofs.machines import Machine

    report["peak_flop_per_s"] = np.nan
    m = Machine("test", peak_flop_per_s={"fp16": 4e12}, bandwidth_bytes_per_s={"dram": 1e12})
    joined = lj.apply(report, lj.load_mapping(data_dir / "ledger" / "mapping.yaml"), machine=m)
    r = dram(joined, 2)  # aten::mm at fp16 -> gemm under the matmul:fp16 roof
    # compute 3·65,536 / 4e12 = 49 ns; memory 3·7,168 / 1e11 (the report's DRAM row) = 215 ns
    assert r["ideal_time_s"] == pytest.approx(2.1504e-7)
    report["bandwidth_bytes_per_s"] = np.nan
    r = dram(lj.apply(report, lj.load_mapping(data_dir / "ledger" / "mapping.yaml"), machine=m), 2)
    # both from the machine
    assert r["ideal_time_s"] == pytest.approx(max(3 * 65_536 / 4e12, 3 * 7_168 / 1e12))
