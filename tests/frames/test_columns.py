"""The one text-column reader (nsroof.frames.columns): every column type gives an object array of str with one
missing value, what pandas' round trip through str gives, without that round trip."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from nsroof.frames.columns import text_values, texts

# each column type a kernel table or report may hold, and the texts it reads as ('' where missing)
COLUMNS = {
    "object str": (pd.Series(["a", "b", ""], dtype=object), ["a", "b", ""]),
    "object missing": (pd.Series(["a", None, np.nan, pd.NA], dtype=object), ["a", "", "", ""]),
    "object mixed": (pd.Series(["a", 1, 2.5], dtype=object), ["a", "1", "2.5"]),
    "object missing first": (pd.Series([None, 1, "x"], dtype=object), ["", "1", "x"]),
    "str": (pd.Series(["a", None, "c"], dtype="str"), ["a", "", "c"]),
    "string[pyarrow]": (pd.Series(["a", None, "a"], dtype="string[pyarrow]"), ["a", "", "a"]),
    "string[python]": (pd.Series(["a", None, "c"], dtype="string[python]"), ["a", "", "c"]),
    "categorical": (pd.Series(["a", None, "b", "a"], dtype="category"), ["a", "", "b", "a"]),
    "categorical of ints": (pd.Series([1, None, 2], dtype="category"), ["1", "", "2"]),
    "float NaN first": (pd.Series([np.nan, 9.0, 8.6]), ["", "9.0", "8.6"]),
    "float": (pd.Series([9.0, np.nan]), ["9.0", ""]),
    "all NaN": (pd.Series([np.nan, np.nan]), ["", ""]),
    "Int64": (pd.Series([1, None, 3], dtype="Int64"), ["1", "", "3"]),
    "bool": (pd.Series([True, False]), ["True", "False"]),
    "empty": (pd.Series([], dtype=object), []),
}


@pytest.mark.parametrize("kind", COLUMNS)
def test_every_column_type_reads_as_str_with_missing_as_empty(kind: str) -> None:
    column, want = COLUMNS[kind]
    got = texts(pd.DataFrame({"c": column}), "c")
    assert got.dtype == object and [type(v) for v in got] == [str] * len(want)
    assert got.tolist() == want
    # what the round trip through pandas' str gives (the expression the readers were before)
    slow = column.astype(object).where(column.notna(), "").astype(str).to_numpy(dtype=object)
    assert got.tolist() == slow.tolist()


@pytest.mark.parametrize("kind", COLUMNS)
def test_a_missing_value_of_choice_marks_exactly_the_missing_cells(kind: str) -> None:
    column, want = COLUMNS[kind]
    got = text_values(column, np.nan)
    missing = column.isna().to_numpy()
    assert pd.isna(got).tolist() == missing.tolist()
    assert got[~missing].tolist() == [w for w, m in zip(want, missing, strict=True) if not m]
    if kind != "categorical of ints":  # pandas prints a category of ints with missing values as floats
        # column.astype(str) keeps NaN where a cell is missing (pandas 3): costs.analytic_fill's cells
        plain = column.astype(str).to_numpy()
        assert [type(v) for v in got] == [type(v) for v in plain]
        assert got[~missing].tolist() == plain[~missing].tolist()


def test_a_missing_column_reads_as_empty_texts() -> None:
    frame = pd.DataFrame({"x": [1, 2, 3]})
    got = texts(frame, "c")
    assert got.dtype == object and got.tolist() == ["", "", ""]
    assert texts(pd.DataFrame(), "c").tolist() == []


def test_a_string_column_shares_one_str_per_distinct_text() -> None:
    column = pd.Series(["kernel_a", "kernel_b"] * 3 + [None], dtype="string[pyarrow]")
    got = texts(pd.DataFrame({"c": column}), "c")
    assert got.tolist() == ["kernel_a", "kernel_b"] * 3 + [""]
    assert len({id(v) for v in got[:6]}) == 2  # the Parquet writer shares a repeated str (arrow_column)


def test_an_object_column_of_str_is_handed_out_unchanged_and_read_only() -> None:
    frame = pd.DataFrame({"c": pd.Series(["a", "b"], dtype=object)})
    got = texts(frame, "c")
    assert got.tolist() == ["a", "b"]
    with pytest.raises(ValueError):  # a caller that writes copies first; the frame stays as it was
        got[0] = "z"
    assert frame["c"].tolist() == ["a", "b"]
