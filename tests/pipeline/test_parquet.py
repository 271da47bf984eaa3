"""The report file: schema with units, metadata, plain pandas loading, atomic writes."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pyarrow.parquet as pq
import pytest

from nsroof import digest
from nsroof.report import parquet
from nsroof.roofs.classify import build_report
from nsroof.schema import COLUMNS
from tests.pipeline.helpers import A100ISH, kernels, quantities


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


@pytest.mark.parametrize("size", [0, 1, 4095, 4096, 4097, 3 * 4096 + 5])
def test_input_hash_across_windows(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, size: int) -> None:
    # the file is hashed in windows of the mapping (4 KiB here: the page size, so every size above
    # crosses window edges); the digest is the one of the whole byte string
    import hashlib

    monkeypatch.setattr(digest, "HASH_WINDOW_BYTES", 4096)
    data = bytes(range(256)) * (size // 256) + b"z" * (size % 256)
    path = tmp_path / "in.csv"
    path.write_bytes(data)
    assert digest.sha256_of(path) == hashlib.sha256(data).hexdigest()


def test_input_hash_of_a_pipe(tmp_path: Path) -> None:
    # not mappable: read instead. sha256("abc") =
    # ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad
    import os
    import threading

    fifo = tmp_path / "in.fifo"
    os.mkfifo(fifo)
    writer = threading.Thread(target=lambda: fifo.write_bytes(b"abc"))
    writer.start()
    assert digest.sha256_of(fifo) == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
    writer.join()
