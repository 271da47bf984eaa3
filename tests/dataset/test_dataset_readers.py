"""A dataset folder loads in every Parquet reader with the same rows and columns as nsroof.load:
pandas.read_parquet(DIR), pyarrow.dataset.dataset(DIR, partitioning="hive"), DuckDB's read_parquet
with hive_partitioning, polars' scan_parquet with hive_partitioning — with ranks and without, one
host and several, a file spanning two hosts, an unknown host."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

import nsroof
from nsroof.dataset import analyze_many
from nsroof.schema import DATASET_COLUMNS
from tests.dataset.test_dataset import KERNELS, raw_csv


def _cell(v: Any) -> Any:
    """One value as every reader can agree on it: numbers as float, nulls as None, text as str."""
    if v is None or v is pd.NA or v is pd.NaT:
        return None
    if isinstance(v, bool):
        return v
    if isinstance(v, (int, float)) or hasattr(v, "dtype"):
        f = float(v)
        return None if math.isnan(f) else f
    return str(v)


def rows(df: pd.DataFrame) -> list[tuple[Any, ...]]:
    out = [tuple(_cell(v) for v in r) for r in df.astype(object).itertuples(index=False)]
    return sorted(out, key=lambda r: tuple((x is None, str(x)) for x in r))


def read_all(ds: Path) -> dict[str, pd.DataFrame]:
    import duckdb
    import polars as pl
    import pyarrow.dataset as pads

    return {
        "pandas": pd.read_parquet(ds),
        "pyarrow.dataset": pads.dataset(ds, partitioning="hive").to_table().to_pandas(),
        "duckdb": duckdb.sql(f"SELECT * FROM read_parquet('{ds}/**/*.parquet', hive_partitioning=true)").df(),
        # a glob, as with DuckDB: polars reads every file under a folder it is given, the dataset's JSON too
        "polars": pl.scan_parquet(f"{ds}/**/*.parquet", hive_partitioning=True).collect().to_pandas(),
    }


def job(tmp_path: Path, layout: dict[str, str]) -> Path:
    root = tmp_path / "job"
    for rel, text in layout.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    return root


def _two_hosts() -> str:
    """One export whose first launch ran on nodeA and second on nodeB."""
    head, last = raw_csv(KERNELS, host="nodeA").rstrip("\n").rsplit("\n", 1)
    return head + "\n" + last.replace('"nodeA"', '"nodeB"') + "\n"


CASES = {
    # the usual one-node run: no rank anywhere (every rank null), one host
    "no ranks, one host": {"a.csv": raw_csv(KERNELS, host="nodeA"),
                           "b.csv": raw_csv(KERNELS[:1], host="nodeA")},
    # ranks from folder names, two hosts, two inputs named alike
    "ranks, two hosts": {f"rank{r}/profile.csv": raw_csv(KERNELS, host=h, pid=10 + r)
                         for r, h in enumerate(["nodeA", "nodeA", "nodeB", "nodeB"])},
    # some ranks known, some not; one export without a host name; one export spanning two hosts
    "mixed": {"rank1/p.csv": raw_csv(KERNELS, host=""), "q.csv": raw_csv(KERNELS, host="nodeC"),
              "multi.csv": _two_hosts()},
}


@pytest.mark.parametrize("case", list(CASES))
def test_every_reader_loads_the_dataset_as_nsroof_load_does(case: str, tmp_path: Path) -> None:
    pytest.importorskip("duckdb")
    pytest.importorskip("polars")
    result = analyze_many([job(tmp_path, CASES[case])], tmp_path / "ds", jobs=1)
    assert result.exit_code == 0, result.summary()
    ref = nsroof.load(tmp_path / "ds").frame
    assert list(ref.columns) == DATASET_COLUMNS
    expected = rows(ref)
    for reader, df in read_all(tmp_path / "ds").items():
        assert list(df.columns) == DATASET_COLUMNS, reader  # no extra key columns, none missing
        assert rows(df) == expected, reader


def test_ranks_hosts_and_nulls_read_back(tmp_path: Path) -> None:
    result = analyze_many([job(tmp_path, CASES["mixed"])], tmp_path / "ds", jobs=1)
    assert result.exit_code == 0, result.summary()
    df = pd.read_parquet(tmp_path / "ds")
    assert df["rank"].dtype == "Int64"  # typed in the file: a nullable integer, whatever the values
    per_source = df.groupby("source")[["host", "rank"]].agg(lambda s: sorted(map(str, s.unique())))
    assert per_source.loc["p.csv", "rank"] == ["1"] and per_source.loc["q.csv", "rank"] == ["<NA>"]
    assert per_source.loc["multi.csv", "host"] == ["nodeA", "nodeB"]  # one part file per host
    assert per_source.loc["p.csv", "host"] == [""]  # no host evidence: empty, as in a single report
    parts = sorted(p.relative_to(tmp_path / "ds").as_posix() for p in (tmp_path / "ds").rglob("*.parquet"))
    assert parts == ["host-nodeA/rank-unknown/source-multi.csv/part-0.parquet",
                     "host-nodeB/rank-unknown/source-multi.csv/part-0.parquet",
                     "host-nodeC/rank-unknown/source-q.csv/part-0.parquet",
                     "host-unknown/rank-1/source-p.csv/part-0.parquet"]
    # filters on the identity columns work in nsroof.load and in pandas alike
    one = nsroof.load(tmp_path / "ds", filters=[("rank", "=", 1)]).frame
    assert set(one["source"].astype(str)) == {"p.csv"}
    assert len(pd.read_parquet(tmp_path / "ds", filters=[("host", "=", "nodeB")])) == 3  # 1 kernel x 3 levels


def test_a_folder_pyarrow_cannot_type_is_a_one_line_input_error(tmp_path: Path) -> None:
    # the layout older nsroof wrote: host both a key and a column, every rank key null
    import pyarrow as pa
    import pyarrow.parquet as pq

    from nsroof.errors import InputError

    part = tmp_path / "old" / "host=a" / "rank=__HIVE_DEFAULT_PARTITION__" / "source=x.csv"
    part.mkdir(parents=True)
    pq.write_table(pa.table({"host": ["a"], "duration_s": [1.0]}), part / "part-0.parquet")
    with pytest.raises(InputError, match="not readable as one dataset") as err:
        nsroof.load(tmp_path / "old")
    assert "\n" not in str(err.value) and "nsroof analyze" in str(err.value)
