"""Nullable integer columns built from numpy arrays directly.

`pd.array(range(n), dtype="Int64")` or a list with None for the missing entries goes through one
Python object per row (30 ms and 100 ms for 250k rows on a 2-core VM); the same column from the values and a
mask is a copy of two numpy arrays (under 2 ms).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd


def row_numbers(n: int) -> pd.arrays.IntegerArray:
    """0, 1, …, n-1 as an Int64 column without missing entries."""
    return pd.arrays.IntegerArray(np.arange(n, dtype=np.int64), np.zeros(n, dtype=np.bool_))


def nonnegative_or_missing(values: np.ndarray | Sequence[int]) -> pd.arrays.IntegerArray:
    """An Int64 column of the values, missing where a value is negative (the -1 of 'no match')."""
    values = np.asarray(values, dtype=np.int64)
    missing = values < 0
    return pd.arrays.IntegerArray(np.where(missing, 0, values), missing)


def all_missing(n: int) -> pd.arrays.IntegerArray:
    """An Int64 column of n missing entries (a column the input lacks)."""
    return pd.arrays.IntegerArray(np.zeros(n, dtype=np.int64), np.ones(n, dtype=np.bool_))
