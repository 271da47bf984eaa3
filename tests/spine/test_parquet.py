"""The report file: schema with units, metadata, plain pandas loading, atomic writes."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pyarrow.parquet as pq
import pytest

from nsroof.report import parquet
from nsroof.report.build import build_report
from nsroof.report.schema import COLUMNS
from tests.spine.helpers import A100ISH, kernels, quantities


@pytest.fixture()
def report() -> pd.DataFrame:
    q = quantities(2, duration_s=[1e-3, 2e-3], flops_fp32=[2e9, 1e6], bytes_dram=[4e8, 1e9])
    return build_report(kernels(2), q, A100ISH)


def test_plain_read_parquet_gets_every_column(tmp_path: Path, report: pd.DataFrame) -> None:
    out = parquet.write(report, tmp_path / "r.parquet", inputs=[], machine=A100ISH)
    df = pd.read_parquet(out)
    assert list(df.columns) == COLUMNS
    assert len(df) == 6
    pd.testing.assert_series_equal(df["intensity"], report["intensity"], check_names=False)


def test_fields_carry_units_and_file_carries_metadata(tmp_path: Path, report: pd.DataFrame) -> None:
    src = tmp_path / "in.csv"
    src.write_text("x")
    out = parquet.write(report, tmp_path / "r.parquet", inputs=[src], machine=A100ISH)
    schema = pq.read_schema(out)
    assert schema.field("duration_s").metadata[b"unit"] == b"s"
    assert schema.field("intensity").metadata[b"unit"] == b"FLOP/byte"
    meta = parquet.read_metadata(out)
    assert meta["schema_version"] == "1"
    # sha256("x") = 2d711642b726b04401627ca9fbac32f5c8530fb1903cc4db02258717921a4881
    assert meta["inputs"][0]["sha256"] == "2d711642b726b04401627ca9fbac32f5c8530fb1903cc4db02258717921a4881"
    assert meta["ceilings"][0]["name"] == "Test A100"
    assert json.dumps(meta)  # plain JSON


def test_load_gives_categoricals(tmp_path: Path, report: pd.DataFrame) -> None:
    out = parquet.write(report, tmp_path / "r.parquet")
    df = parquet.load(out)
    assert isinstance(df["bound"].dtype, pd.CategoricalDtype)
    assert isinstance(df["level"].dtype, pd.CategoricalDtype)
    assert df["duration_s"].dtype == "float64"


def test_a_failed_write_leaves_no_file(tmp_path: Path, report: pd.DataFrame) -> None:
    target = tmp_path / "r.parquet"
    with pytest.raises(ValueError):
        parquet.write(report.drop(columns=["bound"]), target)
    assert list(tmp_path.iterdir()) == []
