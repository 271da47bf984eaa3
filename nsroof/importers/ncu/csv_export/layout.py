"""The ncu CSV export's layout (which page, which header generation) and what every details-page reader
hands on: the launches' identity table and the metric rows in compact form (LongRows)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from nsroof.errors import InputError
from nsroof.frames.distinct import row_codes
from nsroof.importers.ncu import csv_bytes as text
from nsroof.importers.ncu import locale_numbers as numbers
from nsroof.names import kernel_names as names
from nsroof.names import nvtx_paths as nvtx
from nsroof.schema import IDENTITY_COLUMNS, NCU_IDENTITY_COLUMNS

INT_IDENTITY = {"process_id", "context", "stream", "device_id"}


DETAILS_COLUMNS = ("Section Name", "Body Item Label", "Metric Name", "Metric Unit", "Metric Value")


CODED_COLUMNS = ("Section Name", "Body Item Label", "Metric Name", "Metric Unit")


@dataclass
class Layout:
    header: list[str]
    page: str  # "details" or "raw"
    name: str  # "old" (Kernel Time), "new" (Block/Grid/Device/CC), "body-item"
    push_pop: str | None
    start_end: str | None

    @property
    def identity_columns(self) -> list[str]:
        cols = [c for c in self.header if c in NCU_IDENTITY_COLUMNS]
        cols += [c for c in (self.push_pop, self.start_end) if c]
        return cols


@dataclass
class Collected:
    """What reading the rows noticed: row count, repaired rows, skipped text lines, metrics dropped for
    a unit nsroof cannot use (metric, printed unit; nsroof.counters.dimensions.is_read)."""

    n_rows: int = 0
    bad_rows: list[tuple[int, str]] = field(default_factory=list)
    text_lines: list[tuple[int, str]] = field(default_factory=list)
    ignored: list[tuple[str, str]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # warnings about the values (auto-unit rounding)


@dataclass
class LongRows:
    """The details page's metric rows, compact: one entry per (launch, metric) row."""

    kernel_ids: np.ndarray  # int64 launch ID per row
    lines: np.ndarray  # line number per row (approximate when values span lines)
    section: tuple[np.ndarray, list[str]]  # (int32 codes, names)
    body: tuple[np.ndarray, list[str]]
    metric: tuple[np.ndarray, list[str]]
    unit: tuple[np.ndarray, list[str]]
    values: pa.Array | pa.ChunkedArray


def find_layout(export: text.Export) -> Layout:
    header = export.header
    if len(set(header)) != len(header):
        dupes = sorted({c for c in header if header.count(c) > 1})
        raise InputError(export.path, f"header repeats column(s) {dupes}", line=export.header_line,
                         hint=text.EXPORT_HINT)
    push_pop = next((c for c in header if nvtx.is_push_pop_column(c)), None)
    start_end = next((c for c in header if nvtx.is_start_end_column(c)), None)
    if "Kernel Name" not in header:
        raise InputError(export.path, 'header has no "Kernel Name" column: not an Nsight Compute export',
                         line=export.header_line, hint=text.EXPORT_HINT)
    if "Metric Name" in header and "Metric Value" in header:
        page = "details"
        name = "body-item" if "Body Item Label" in header else ("old" if "Kernel Time" in header else "new")
    else:
        page = "raw"
        name = "old" if "Kernel Time" in header else "new"
    return Layout(header, page, name, push_pop, start_end)


def launch_ids(export: text.Export, column: pa.ChunkedArray | pa.Array, lines: np.ndarray) -> np.ndarray:
    cleaned = pc.replace_substring_regex(numbers._as_strings(column), r"[,.\s]", "")
    ok = pc.match_substring_regex(cleaned, r"^\d+$")
    okn = np.asarray(ok.to_numpy(zero_copy_only=False), dtype=bool)
    if not okn.all():
        bad = int(np.flatnonzero(~okn)[0])
        raise InputError(export.path, f"launch ID {column[bad].as_py()!r} is not a number",
                         line=int(lines[bad]),
                         hint="the row is damaged or not part of an ncu export; " + text.EXPORT_HINT)
    return np.asarray(pc.cast(cleaned, pa.int64()).to_numpy(zero_copy_only=False), dtype=np.int64)


def first_per_id(table: pa.Table, ids: np.ndarray) -> tuple[np.ndarray, pa.Table]:
    uniq, first = np.unique(ids, return_index=True)
    order = np.argsort(first, kind="stable")
    return uniq[order], table.take(pa.array(first[order]))


def dict_codes(column: pa.ChunkedArray | pa.Array) -> tuple[np.ndarray, list[str]]:
    """int32 codes and the distinct strings of a text column (plain, or dictionary-typed as pyarrow's
    CSV reader builds it chunk by chunk: the chunks' dictionaries are unified first)."""
    if pa.types.is_dictionary(column.type):
        enc = (column.unify_dictionaries().combine_chunks() if isinstance(column, pa.ChunkedArray)
               else column)
    else:
        enc = pc.dictionary_encode(column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column)
        if isinstance(enc, pa.ChunkedArray):
            enc = enc.combine_chunks()
    return (
        np.asarray(enc.indices.to_numpy(zero_copy_only=False), dtype=np.int32),
        [str(v) for v in enc.dictionary.to_pylist()],
    )


def shared_texts(column: pa.ChunkedArray | pa.Array, func: Callable[[str], Any] | None = None) -> list[Any]:
    """A text column as Python strings (or func of each), one object per distinct value: launches repeat
    a few kernel names (~1 KB each for templated kernels), so each is decoded (and func called) once and
    later work (short names, factorising, Parquet) meets shared, already-hashed objects."""
    codes, texts = dict_codes(column)
    distinct = np.empty(len(texts), dtype=object)
    for i, value in enumerate(texts):
        distinct[i] = value if func is None else func(value)
    return list(distinct[codes])


def _nvtx_columns(push: list[str], start: list[str]) -> tuple[list[list[str]], list[str]]:
    """nvtx_ranges (a list of its own per launch) and nvtx_path, parsed once per distinct pair of NVTX
    cells (a run repeats a few range stacks over thousands of launches)."""
    codes, first = row_codes(np.array(push, dtype=object), np.array(start, dtype=object))
    parsed = [nvtx.ranges(push[i], start[i]) for i in first.tolist()]
    paths = np.empty(len(parsed), dtype=object)
    for j, r in enumerate(parsed):
        paths[j] = nvtx.path(r)
    return [list(parsed[c]) for c in codes.tolist()], list(paths[codes])


def identity_frame(export: text.Export, layout: Layout, ids: np.ndarray, table: pa.Table) -> pd.DataFrame:
    """One row per launch, kernel-table identity columns, in ID order."""
    if len(ids) > 1 and not bool(np.all(ids[1:] >= ids[:-1])):  # ncu numbers launches in file order
        order = np.argsort(ids, kind="stable")
        ids = ids[order]
        table = table.take(pa.array(order))
    n = len(ids)
    cols: dict[str, Any] = {"source": [export.path.name] * n, "kernel_id": ids.astype(np.int64)}
    for src, dst in NCU_IDENTITY_COLUMNS.items():
        if dst == "kernel_id":
            continue
        if src not in table.column_names:
            continue
        values = table.column(src)
        if dst in INT_IDENTITY:
            cleaned = pc.replace_substring_regex(values, r"[,.\s]", "")
            ok = pc.match_substring_regex(cleaned, r"^-?\d+$")
            as_int = pc.cast(pc.if_else(ok, cleaned, pa.scalar(None, pa.string())),
                             pa.int64()).combine_chunks()
            cols[dst] = pd.arrays.IntegerArray(
                np.asarray(as_int.fill_null(0).to_numpy(zero_copy_only=False), dtype=np.int64),
                np.asarray(as_int.is_null().to_numpy(zero_copy_only=False), dtype=bool))
        elif dst == "cc":
            cols[dst] = shared_texts(values, lambda v: v.replace(",", "."))
        else:
            cols[dst] = shared_texts(values)
    if "kernel_name" in cols:
        short: dict[str, str] = {}  # once per distinct name (the names are shared objects: hashed once)
        cols["function"] = [short[k] if k in short else short.setdefault(k, names.short_name(k))
                            for k in cols["kernel_name"]]
    push = shared_texts(table.column(layout.push_pop)) if layout.push_pop else [""] * n
    start = shared_texts(table.column(layout.start_end)) if layout.start_end else [""] * n
    cols["nvtx_ranges"], cols["nvtx_path"] = _nvtx_columns(push, start)
    out: dict[str, Any] = {}
    for name, (dtype, _) in IDENTITY_COLUMNS.items():
        if dtype == "object":
            # object Series: pandas would otherwise infer its str dtype, then be converted back
            out[name] = pd.Series(cols[name] if name in cols else [""] * n, dtype=object)
        elif name in cols:
            out[name] = cols[name]
        else:
            out[name] = pd.array([pd.NA] * n, dtype="Int64")
    frame = pd.DataFrame(out)
    frame["kernel_id"] = frame["kernel_id"].astype("int64")
    for name, (dtype, _) in IDENTITY_COLUMNS.items():
        if dtype == "object" and frame[name].dtype != object:
            frame[name] = frame[name].astype(object)  # the kernel-table contract: plain Python strings
    return frame


def positions(sorted_ids: np.ndarray, ids: np.ndarray) -> np.ndarray:
    """Where each of `ids` (all among `sorted_ids`, ascending and distinct) stands in `sorted_ids`. ncu
    numbers launches 0, 1, 2 …: a lookup table then, one gather (a binary search per row cost 5-7 ms
    for 208,000 rows); a search for IDs far apart."""
    if len(sorted_ids) and sorted_ids[0] >= 0 and sorted_ids[-1] < 4 * len(sorted_ids) + 4096:
        table = np.zeros(int(sorted_ids[-1]) + 1, dtype=np.int64)
        table[sorted_ids] = np.arange(len(sorted_ids))
        return table[ids]
    return np.searchsorted(sorted_ids, ids)
