"""The report's Arrow table built column by column (nsroof.report.parquet.to_table) is the table pyarrow's
own from_pandas makes of the same frame: the same values, nulls, types and pandas metadata, so a plain
pandas.read_parquet of the file is unchanged."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest

from nsroof.report import parquet
from nsroof.schema import REPORT_FIELDS, arrow_schema

NAMES = ["void gemm<128>(float*, int)", "void norm(float const*)", "élément"]  # one non-ASCII text


def _frame(n: int) -> pd.DataFrame:
    """A report-shaped frame of n rows: every column of its declared type, texts shared objects (as the
    importers build them) with None and NaN among them, nullable ints, NaN floats, a categorical."""
    rng = np.random.default_rng(7)
    pick = rng.integers(0, len(NAMES), n)
    cols: dict[str, object] = {}
    for f in REPORT_FIELDS:
        if f.type == pa.string():
            values = np.array(NAMES, dtype=object)[pick]
            values[::7] = None
            values[3::11] = np.nan
            cols[f.name] = pd.Series(values, dtype=object)
        elif f.type == pa.float64():
            x = rng.random(n)
            x[::5] = np.nan
            cols[f.name] = x
        elif f.type == pa.int64():
            cols[f.name] = pd.array([None if i % 4 == 0 else i for i in range(n)], dtype="Int64")
        else:
            cols[f.name] = rng.random(n) > 0.5
    frame = pd.DataFrame(cols)
    frame["level"] = frame["level"].fillna("dram").astype("category")  # categorical, a null among its codes
    frame.loc[frame.index[:1], "level"] = None
    frame["bound"] = pd.Series(np.array(["memory", "compute"], dtype=object)[pick % 2], dtype="str")
    frame["kernel_name"] = [f"k{i}" for i in range(n)]  # every value its own object: converted cell by cell
    return frame


def _from_pandas(frame: pd.DataFrame, metadata: dict[str, object]) -> pa.Table:
    """What nsroof wrote before: pyarrow's from_pandas, categoricals as text, both metadata keys."""
    plain = frame.astype({c: object for c in frame.columns
                          if isinstance(frame[c].dtype, pd.CategoricalDtype)})
    schema = arrow_schema({parquet.METADATA_KEY: json.dumps(metadata).encode()}, REPORT_FIELDS)
    table = pa.Table.from_pandas(plain, schema=schema, preserve_index=False)
    return table.replace_schema_metadata({**(table.schema.metadata or {}),
                                          parquet.METADATA_KEY: schema.metadata[parquet.METADATA_KEY]})


@pytest.mark.parametrize("n", [0, 5, parquet.IDENTITY_MIN_ROWS + 44])
def test_to_table_is_what_from_pandas_gives(n: int) -> None:
    frame = _frame(n)
    metadata = {"nsroof_version": "test"}
    got = parquet.to_table(frame, metadata)
    want = _from_pandas(frame, metadata)
    assert got.schema.equals(want.schema, check_metadata=True)
    for name in want.column_names:
        assert got.column(name).equals(want.column(name)), name
    if n:
        assert got.column("missing").null_count == want.column("missing").null_count > 0


def test_a_value_of_the_wrong_type_is_refused_as_before() -> None:
    frame = _frame(parquet.IDENTITY_MIN_ROWS)
    frame.loc[3, "missing"] = 1.5  # a number in a text column
    with pytest.raises((pa.ArrowTypeError, pa.ArrowInvalid)):
        parquet.to_table(frame, {})


def test_a_report_written_before_category_and_phase_loads_with_them(tmp_path: Path) -> None:
    """An older nsroof's report lacks `category` and `phase`: they are read off its names on load, so it
    shows and is written again as a new one (the roofline numbers do not read them)."""
    import pyarrow.parquet as pq

    from nsroof.report.load import load_report
    from tests.report.report_frames import five_kernels

    frame = five_kernels()
    path = tmp_path / "old.parquet"
    parquet.write(frame, path)
    table = pq.read_table(path)
    pq.write_table(table.drop(["category", "phase"]), path)
    loaded, _ = load_report(path)
    assert loaded.drop_duplicates("kernel_id")["category"].astype(str).tolist() == [
        "GEMM", "elementwise", "other", "reduction/softmax", "other"]  # by the kernels' names
    assert (loaded["phase"].astype(str) == "").all()
