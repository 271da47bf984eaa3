"""Per-row text functions evaluated once per distinct row.

Report columns repeat a few distinct texts over thousands of rows (a provenance formula, a missing-
metric list, a kernel name once per level), so a Python function over rows runs once per distinct
combination of its inputs and the results are spread back with integer codes.
"""

from __future__ import annotations

import ctypes
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import pandas as pd


def row_codes(*columns: Sequence[Any] | np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(code per row, index of each code's first row): rows with equal values in every column share a
    code; codes are numbered in order of first appearance. Each column holds values of one type (as
    equal values of two types, True and 1, would share a code); None and NaN are one missing value."""
    n = len(columns[0]) if columns else 0
    key = np.zeros(n, dtype=np.int64)
    bound = 1  # every key is below it
    for column in columns:
        values = np.asarray(column)
        if values.dtype == np.bool_:  # flags code as they are, without hashing
            codes, size = values.astype(np.int64), 2
        else:
            if values.dtype.kind not in "biuf":  # numbers hash as they are; the rest as objects
                values = values.astype(object, copy=False)
            # missing values (None, NaN, pd.NA) get code -1, then one code of their own after the others
            # (factorize with use_na_sentinel=False would make an extra missing-value pass over the column)
            codes, size = _codes(values)
        if bound * size >= 2**62:  # renumber the keys so far before the product could leave int64
            key, seen = pd.factorize(key)
            key, bound = np.asarray(key, dtype=np.int64), len(seen)
        key, bound = key * size + codes, bound * size
    key = np.asarray(pd.factorize(key)[0], dtype=np.int64)  # numbered in order of first appearance
    return key, first_appearances(key)


def _codes(values: np.ndarray) -> tuple[np.ndarray, int]:
    """(code per value, number of codes): equal values share a code, missing values (None, NaN, pd.NA) one
    code after the others. An object column is coded by object identity first (a text repeated over
    thousands of rows is most often one shared str) and its distinct objects then by value: hashing every
    cell's text cost 2 ms a column of 47,000 provenance texts."""
    if values.dtype == object and len(values) >= _IDENTITY_MIN_ROWS:
        values = np.ascontiguousarray(values)
        by_id = identity_codes(values)
        if 2 * (int(by_id.max()) + 1) <= len(values):
            distinct, uniques = pd.factorize(values[first_appearances(by_id)])
            distinct = np.where(distinct < 0, len(uniques), distinct).astype(np.int64)
            return distinct[by_id], len(uniques) + 1
    codes, uniques = pd.factorize(values)
    return np.where(codes < 0, len(uniques), codes).astype(np.int64), len(uniques) + 1


# below this many rows an object column is hashed as it is: the identity pass's fixed cost is more
_IDENTITY_MIN_ROWS = 256


def object_ids(values: np.ndarray) -> np.ndarray:
    """id() of every object of a contiguous object array, read from the array's own buffer of object
    pointers (CPython's id is the object's address) instead of one id() call per cell: 2.1 -> 0.15 ms for
    47,000 cells. A copy: valid while `values` holds the objects."""
    if values.dtype != object or not values.flags.c_contiguous:
        raise ValueError("object_ids reads a contiguous object array")
    if not len(values):
        return np.zeros(0, dtype=np.uintp)
    pointers = (ctypes.c_void_p * len(values)).from_address(values.ctypes.data)
    return np.frombuffer(memoryview(pointers), dtype=np.uintp).copy()


def identity_codes(values: np.ndarray) -> np.ndarray:
    """A code per cell of a contiguous object array, equal where cells hold the same object, numbered in order
    of first appearance (no cell hashed by value: unhashable lists code too)."""
    return np.asarray(pd.factorize(object_ids(values))[0], dtype=np.int64)


def first_appearances(codes: np.ndarray) -> np.ndarray:
    """For codes numbered in order of first appearance (pandas.factorize, Arrow's dictionary_encode),
    the index of each code's first row, code by code: a row holds one where its code exceeds every
    code before it (one pass, no sort)."""
    codes = np.asarray(codes)
    if not len(codes):
        return np.zeros(0, dtype=np.int64)
    seen_before = np.maximum.accumulate(np.concatenate([[-1], codes[:-1]]))
    return np.flatnonzero(codes > seen_before)


def group_rows(codes: np.ndarray, count: int) -> list[np.ndarray]:
    """The rows of each code 0..count-1, each in row order (one stable sort for all of them, not a pass over
    every row per code)."""
    codes = np.asarray(codes, dtype=np.int64)
    order = np.argsort(codes, kind="stable")
    bounds = np.searchsorted(codes[order], np.arange(count + 1)).tolist()
    return [order[bounds[c]:bounds[c + 1]] for c in range(count)]


def map_rows(func: Callable[..., Any], *columns: Sequence[Any] | np.ndarray) -> np.ndarray:
    """[func(*row) for row in zip(*columns)] as an object array, with func called once per distinct row."""
    n = len(columns[0]) if columns else 0
    if n == 0:
        return np.empty(0, dtype=object)
    return spread(func, *row_codes(*columns), *columns)


def spread(func: Callable[..., Any], codes: np.ndarray, first: np.ndarray,
           *columns: Sequence[Any] | np.ndarray) -> np.ndarray:
    """func(*row) for every row, given row_codes of (at least) what func depends on: called on each
    code's first row, the results spread by code. Lets a key computed once serve several calls."""
    arrays = [np.asarray(c, dtype=object) for c in columns]
    results = np.empty(len(first), dtype=object)
    for j, i in enumerate(first.tolist()):
        results[j] = func(*(a[i] for a in arrays))
    return results[codes]
