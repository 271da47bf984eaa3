"""Every real export in ../shared/fixtures/{csv,converted,synthetic} through nsroof.importers.ncu.csv_export.

Skipped when the folder is absent (fresh clones without the shared data). Values checked here were
read by eye in the files; the arithmetic is in the comments."""

from __future__ import annotations

import csv
import io
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from nsroof.errors import InputError
from nsroof.importers.kernel_table import metric_columns
from nsroof.importers.ncu import csv_export
from nsroof.schema import FileFacts
from tests._paths import SHARED_FIXTURES

_ROOT = SHARED_FIXTURES
_FILES = sorted(
    p.relative_to(_ROOT).as_posix()
    for folder in ("csv", "converted", "synthetic")
    for p in (_ROOT / folder).glob("*.csv")
) if _ROOT.is_dir() else []
ERROR_ONLY = "csv/llmperfopt__error_only_raw.csv"


def distinct_ids(path: Path) -> set[int]:
    """Launch IDs counted independently of the importer: the first field of every row after the header."""
    text = path.read_text(encoding="utf-8-sig", errors="replace")
    start = text.find('"ID",')
    ids = set()
    for row in csv.reader(io.StringIO(text[start:])):
        if row and row[0].replace(",", "").isdigit():
            ids.add(int(row[0].replace(",", "")))
    return ids


@pytest.mark.parametrize("name", _FILES or ["<no shared fixtures>"])
def test_every_export_parses_with_one_row_per_launch(shared_fixtures: Path, name: str) -> None:
    path = shared_fixtures / name
    if name == ERROR_ONLY:
        with pytest.raises(InputError) as err:
            csv_export.read(path)
        assert err.value.line == 1 and "did not match any section" in str(err.value)
        return
    df, facts = csv_export.read(path)
    assert sorted(df["kernel_id"].tolist()) == sorted(distinct_ids(path))
    assert facts.format in ("ncu-csv:details", "ncu-csv:raw")
    assert facts.number_style in ("C", "en_US", "de_DE")
    assert set(facts.metric_units) == set(c for c in df.columns if c not in df.columns[:16])
    dtypes = df.dtypes.astype(str).to_dict()
    assert {dtypes[c] for c in metric_columns(df)} <= {"float64", "object"}
    assert df["function"].map(len).gt(0).all()


def test_shared_folder_is_complete(shared_fixtures: Path) -> None:
    assert len(_FILES) >= 70 and ERROR_ONLY in _FILES


def read(shared: Path, name: str) -> tuple[pd.DataFrame, FileFacts]:
    df, facts = csv_export.read(shared / name)
    return df.set_index("kernel_id"), facts


def test_llmperfopt_details_auto_units(shared_fixtures: Path) -> None:
    df = read(shared_fixtures, "csv/llmperfopt__k0016_gemm_ncu.details.csv")[0]
    # "63.77" Mbyte; "197.38" Kbyte; "404.70" us; "45,902,462,976" (no unit); "13.79" Ghz DRAM Frequency
    assert df.at[0, "dram__bytes_read.sum"] == pytest.approx(63.77e6)
    assert df.at[0, "dram__bytes_write.sum"] == pytest.approx(197.38e3)
    assert df.at[0, "gpu__time_duration.sum"] == pytest.approx(404.70e-6)
    assert df.at[0, "sm__ops_path_tensor_src_bf16_dst_fp32.sum"] == 45_902_462_976.0
    assert df.at[0, "dram__cycles_elapsed.avg.per_second"] == pytest.approx(13.79e9)
    assert np.isnan(df.at[0, "flop_count_sp.sum"])  # "n/a" on sm_120
    assert df.at[0, "cc"] == "12.0"


def test_llmperfopt_roofline_chart_section(shared_fixtures: Path) -> None:
    df = read(shared_fixtures, "csv/llmperfopt__k0016_gemm_ncu.section_SpeedOfLight_RooflineChart.csv")[0]
    # 21,760 FFMA/cycle peak (170 SMs x 128); x2 = 43,520 FLOP/cycle; DRAM 158.07 Gbyte/s achieved
    assert df.at[0, "sm__sass_thread_inst_executed_op_ffma_pred_on.sum.peak_sustained"] == 21_760.0
    assert df.at[0, "derived__sm__sass_thread_inst_executed_op_ffma_pred_on_x2"] == 43_520.0
    assert df.at[0, "dram__bytes.sum.per_second"] == pytest.approx(158.07e9)
    assert df.at[0, "dram__bytes.sum.peak_sustained"] == 128.0
    assert df.at[0, "sm__cycles_elapsed.avg.per_second"] == pytest.approx(2.01e9)


def test_leleucas_old_layout(shared_fixtures: Path) -> None:
    df = read(shared_fixtures, "csv/leleucas__nsight_virtual.csv")[0]
    # kernel 0: "7,488" nsecond; "233,856" byte L2; "1,009,150,443.18" cycle/second
    assert df.at[0, "gpu__time_duration.sum"] == pytest.approx(7.488e-6)
    assert df.at[0, "lts__t_bytes.sum"] == 233_856.0
    assert df.at[0, "sm__cycles_elapsed.avg.per_second"] == pytest.approx(1_009_150_443.18)
    assert df.at[0, "function"] == "ampere_sgemm_32x32_sliced1x4_tn"


def test_gardenia_print_fp(shared_fixtures: Path) -> None:
    df, facts = read(shared_fixtures, "csv/gardenia__gemm.csv")
    # --print-fp with grouping: "5,318,969,728.00" and "693,423,599,808.00" byte
    assert df.at[0, "dram__bytes.sum"] == 5_318_969_728.0
    assert df.at[0, "lts__t_bytes.sum"] == 693_423_599_808.0
    assert facts.number_style == "en_US"


def test_olajide_windows_capture(shared_fixtures: Path) -> None:
    df = read(shared_fixtures, "csv/olajide__saxpy.csv")[0]  # BOM, CRLF, app output, `ns`, no `void`
    # "292,928" ns = 2.92928e-4 s; "134,221,568" byte
    assert df.at[0, "gpu__time_duration.sum"] == pytest.approx(292_928e-9)
    assert df.at[0, "dram__bytes_op_read.sum"] == 134_221_568.0
    assert df.at[0, "function"] == "saxpy_kernel"


def test_lashi_c_numbers_long_unit_names(shared_fixtures: Path) -> None:
    df, facts = read(shared_fixtures, "csv/lashi__ncu_reduceInteger.csv")
    # "104040704" byte, "814048" nsecond (no grouping: LANG=C)
    assert df.at[0, "dram__bytes.sum"] == 104_040_704.0
    assert df.at[0, "gpu__time_duration.sum"] == pytest.approx(814_048e-9)
    assert facts.number_style == "C"


def test_meinie_raw_page_b200(shared_fixtures: Path) -> None:
    df, facts = read(shared_fixtures, "csv/meinie__flashinfer_paged_decode__gqa_bf16_b1_ctx4k_p64.ncu.csv")
    # units row "ns": kernel 0 "9920" = 9.92e-6 s, kernel 1 "23872"
    assert df.at[0, "gpu__time_duration.sum"] == pytest.approx(9.92e-6)
    assert df.at[1, "gpu__time_duration.sum"] == pytest.approx(23.872e-6)
    assert df.at[0, "device"] == "NVIDIA B200"
    assert facts.hints  # no byte counters in this export: the summary must say so


@pytest.mark.parametrize("locale", ["en_US", "de_DE"])
def test_synthetic_locales(shared_fixtures: Path, locale: str) -> None:
    df, facts = read(shared_fixtures, f"synthetic/fixture_ncu2024_raw_{locale}.csv")
    # 2,249,873,280 byte; 77,712,512 nsecond = 0.077712512 s; 1,443,405,676.69 cycle/second
    assert facts.number_style == locale
    assert df.at[0, "dram__bytes_read.sum"] == 2_249_873_280.0
    assert df.at[0, "gpu__time_duration.sum"] == pytest.approx(0.077712512)
    assert df.at[0, "smsp__cycles_elapsed.avg.per_second"] == pytest.approx(1_443_405_676.69)


def test_synthetic_nvtx_2022_and_2024(shared_fixtures: Path) -> None:
    for name in ("synthetic/fixture_ncu2022_raw_nvtx_base.csv", "synthetic/fixture_ncu2024_raw_nvtx_base.csv",
                 "synthetic/fixture_ncu2024_details_nvtx_base.csv"):
        df = read(shared_fixtures, name)[0]
        assert df.at[0, "nvtx_ranges"] == [
            "model.forward", "aten::linear, seq = 12, op_id = 3",
            "aten::addmm, seq = 12, op_id = 5, sizes = [[64, 128], [128, 256]], input_op_ids = [(3, 0)]",
            "layer0", "step0"], name
        assert df.at[1, "nvtx_path"] == "model.forward/aten::relu, seq = 13, op_id = 6/layer1/step1", name


def test_synthetic_partial_quotes(shared_fixtures: Path) -> None:
    df, facts = read(shared_fixtures, "synthetic/fixture_ncu2024_raw_nvtx_partial_quotes.csv")
    assert sorted(df.index) == [0, 1]
    assert df.at[0, "nvtx_ranges"] == ['outer "quoted", name', "inner:colon"]
    assert df.at[1, "nvtx_ranges"] == []
    assert len([w for w in facts.warnings if "quote" in w]) == 1


def test_manual_nvtx_conversion(shared_fixtures: Path) -> None:
    df = read(shared_fixtures, "converted/nsighttraining__manual_nvtx.raw_base.csv")[0]
    assert [df.at[k, "nvtx_path"] for k in sorted(df.index)] == [
        "run_test/init_data", "run_test/daxpy", "run_test/check_results"]


_PAIRS = sorted({n.rsplit(".", 2)[0] for n in _FILES if n.startswith("converted/")})


@pytest.mark.parametrize("report", _PAIRS or ["<none>"])
def test_converted_pages_agree(shared_fixtures: Path, report: str) -> None:
    """The same report exported four ways gives the same numbers: details vs raw (labels mapped to
    metrics), auto-scaled units vs base units (per-row unit conversion, en_US vs C numbers)."""
    raw, raw_facts = read(shared_fixtures, f"{report}.raw_base.csv")
    auto = read(shared_fixtures, f"{report}.raw_auto_enUS.csv")[0]
    details = read(shared_fixtures, f"{report}.details_base.csv")[0]
    details_auto = read(shared_fixtures, f"{report}.details_auto_enUS.csv")[0]
    assert list(raw.index) == list(auto.index) == list(details.index) == list(details_auto.index)
    raw_types = raw.dtypes.astype(str).to_dict()
    det_types = details.dtypes.astype(str).to_dict()
    mapped = [c for c in metric_columns(details)
              if raw_types.get(c) == "float64" and det_types[c] == "float64"]
    # every standard-section export shows "Duration"; lashi__index has only a custom section
    assert "gpu__time_duration.sum" in mapped or report.endswith("lashi__index")
    if mapped:  # base units on both pages: identical figures
        assert np.allclose(details[mapped].to_numpy(), raw[mapped].to_numpy(), rtol=1e-9, equal_nan=True)
    for c in ("gpu__time_duration.sum", "dram__cycles_elapsed.avg.per_second"):
        if c in details_auto.columns:  # 2 decimals in auto units: within 0.5% of the base value
            assert np.allclose(details_auto[c], raw[c], rtol=5e-3), c
    auto_types = auto.dtypes.astype(str).to_dict()
    units = raw_facts.metric_units
    # percentages print 2 decimals in base mode, 6 in auto: rounding, not units
    cols = [c for c in metric_columns(raw) if raw_types[c] == "float64" and auto_types.get(c) == "float64"
            and units[c] != "%"]
    a, b = raw[cols].to_numpy(), auto[cols].to_numpy()
    both = ~np.isnan(a) & ~np.isnan(b) & (np.abs(a) >= 100)
    assert both.sum() > 0
    assert np.allclose(a[both], b[both], rtol=1e-3)
