"""Text columns read as numpy object arrays of str: the one reader every stage uses.

A column of the kernel table or the report may come as object (str cells, maybe None or NaN), as pandas'
string dtype (Arrow- or Python-backed; pandas 3's default for text), as a category or as numbers; every
reader gets the same thing, an object array holding a str per cell and one missing value ('' unless told)
where the cell is None, NaN or pd.NA.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd


def texts(frame: pd.DataFrame, name: str) -> np.ndarray:
    """frame[name] as an object array of str, '' where a cell is missing; every row '' when the frame has
    no such column. Not a copy where the column holds str already: callers copy before they write (pandas
    hands the array out read-only)."""
    if name not in frame.columns:
        return np.full(len(frame), "", dtype=object)
    return text_values(frame[name])


def text_values(column: pd.Series, missing: Any = "") -> np.ndarray:
    """The column as an object array of str (str() of a number or a category), `missing` where a cell is
    None, NaN or pd.NA. Neither path goes through pandas' string dtype and back (a round trip to Arrow): an
    object column of str is handed out as it is, a string column's distinct texts converted once."""
    if column.dtype == object:
        values = column.to_numpy()
        # every cell a str (the common case): nothing to replace, and this test is ~8x cheaper than
        # the missing-value pass of to_numpy(na_value=...)
        if pd.api.types.infer_dtype(values, skipna=False) == "string":
            return values
    elif isinstance(column.dtype, pd.StringDtype):
        # each distinct text converted once (Arrow's dictionary encoding), the rows sharing its str: a
        # new str per cell cost the conversion, and left the Parquet writer nothing to share
        # (parquet.arrow_column)
        codes, distinct = pd.factorize(column)
        return np.append(distinct.to_numpy(dtype=object), np.array([missing], dtype=object))[codes]
    present = column.notna()
    values = column.astype(object).where(present, "").astype(str).to_numpy(dtype=object)
    if not (isinstance(missing, str) and missing == ""):
        values[~present.to_numpy()] = missing
    return values
