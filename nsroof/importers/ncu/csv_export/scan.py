"""The details page by prefix scan, the fast reader for plain files.

Rows of one launch repeat its identity prefix (ID ... CC, with the kernel name and NVTX cells: ~93% of
a large export's bytes) byte for byte, so only each launch's first row is parsed in full; every other
row is checked against the prefix (a memcmp) and only its tail (section, metric, unit, value, rule
fields) is kept. Two twins give the same rows
(tests/importers/ncu/csv_export/test_ncu_csv_scan.py, _tails.py):
  - compiled (nsroof/importers/_rowscan.c, optional at build time): rows split by _rowscan.scan, the
    tails' cells by _rowscan.split_tails window by window on a worker thread while the scan goes on;
  - Python: rows split by `mm.readline`, the tails' cells by pyarrow's CSV parser at the ragged
    metric-row width.
Each returns None for what it cannot vouch for; the robust reader (robust.py) takes the file then.
"""

from __future__ import annotations

import csv
import mmap
import re
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv

from nsroof.importers.ncu import csv_bytes as text
from nsroof.importers.ncu.csv_export.layout import (
    CODED_COLUMNS,
    DETAILS_COLUMNS,
    Layout,
    LongRows,
    dict_codes,
)
from nsroof.importers.ncu.csv_export.robust import csv_fields

_DICT_TEXT = pa.dictionary(pa.int32(), pa.string())

SCAN_WINDOW_BYTES = 16 << 20


@dataclass
class Scanned:
    # every row from `Section Name` on, line end kept, file order; whole rows per chunk (none kept when an
    # on_chunk consumer took each as it came: then the tails of one window at a time are alive, not all)
    chunks: list[bytes]
    count: int  # rows in the chunks (each ends in its only newline)
    heads: list[bytes]  # the identity prefix of each run of rows sharing one (its cells, no final comma)
    run_ids: list[int]  # the launch ID of each run
    starts: list[int]  # index (among the rows) of each run's first row
    blanks: list[int]  # per skipped blank line: the index of the row after it


def compiled_function(name: str) -> Callable[..., Any] | None:
    """A function of the compiled splitter (nsroof/importers/_rowscan.c), None where it was not built."""
    try:
        from nsroof.importers import _rowscan  # type: ignore[attr-defined]
    except ImportError:
        return None
    function: Callable[..., Any] = getattr(_rowscan, name)
    return function


def _compiled_scan() -> Callable[..., Any] | None:
    """The compiled row splitter (_rowscan.scan)."""
    return compiled_function("scan")


# the identity prefix: `section_at` cells quoted the way ncu quotes (inner quotes doubled), the first
# one a launch ID; a match lies within one line and ends where `Section Name` begins


def _head_pattern(section_at: int) -> re.Pattern[bytes]:
    return re.compile(rb'"([0-9]+)",(?:"[^"\n]*(?:""[^"\n]*)*",){' + str(section_at - 1).encode() + rb"}")


def scan_rows(
    export: text.Export,
    section_at: int,
    *,
    compiled: bool = True,
    on_chunk: Callable[[bytes, int], None] | None = None,
) -> Scanned | None:
    """Split every row after the header into its identity prefix and its tail (see above). None when
    a row is not what ncu writes: a cell not quoted the way ncu quotes, a non-numeric ID (text among
    the rows), a newline inside the identity cells, bytes that are not UTF-8, no final newline.
    The compiled splitter and the Python loop give the same result
    (tests/importers/ncu/csv_export/test_ncu_csv_scan.py); the compiled one also declines IDs of more than 18
    digits (int64). `on_chunk(tails, first_row)` is handed each window's tails as soon as they are split (the
    Python loop: all of them at the end); the compiled splitter then keeps none of them in `chunks`."""
    try:
        with open(export.path, "rb") as fh:
            mm = mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ)
    except (OSError, ValueError):  # empty, or not a regular file
        return None
    try:
        size = len(mm)
        if size <= export.data_offset or mm[size - 1] != 10:
            return None  # every row must end in a newline: then every line read holds exactly one
        scan = _compiled_scan() if compiled else None
        if scan is not None:
            return _scan_rows_compiled(scan, mm, export.data_offset, section_at, on_chunk)
        scanned = _scan_rows_python(mm, export.data_offset, section_at)
        if scanned is not None and on_chunk is not None:
            on_chunk(scanned.chunks[0], 0)
        return scanned
    finally:
        mm.close()


def _drop_pages(mm: mmap.mmap, start: int, end: int) -> int:
    """Drop the mapped pages in [start, end) from this process (the page cache keeps them): the scan's
    resident set stays near one window. Returns where the next drop starts."""
    end -= end % mmap.PAGESIZE
    if end > start and hasattr(mm, "madvise") and hasattr(mmap, "MADV_DONTNEED"):
        mm.madvise(mmap.MADV_DONTNEED, start, end - start)
        return end
    return start


def _scan_rows_compiled(
    scan: Callable[..., Any],
    mm: mmap.mmap,
    pos: int,
    section_at: int,
    on_chunk: Callable[[bytes, int], None] | None = None,
) -> Scanned | None:
    """One call of the compiled splitter per window of SCAN_WINDOW_BYTES (it reads each row whole)."""
    chunks: list[bytes] = []
    heads: list[bytes] = []
    run_ids: list[int] = []
    starts: list[int] = []
    blanks: list[int] = []
    count = 0
    prefix = b""
    have_heads = False
    dropped = 0
    size = len(mm)
    while pos < size:
        got = scan(mm, pos, min(size, pos + SCAN_WINDOW_BYTES), prefix, section_at, have_heads)
        if got is None:
            return None
        data, n, runs, blank_at, end, prefix, have_heads = got
        if on_chunk is not None:
            on_chunk(data, count)
        else:
            chunks.append(data)
        if runs:
            quads = np.frombuffer(runs, dtype=np.int64).reshape(-1, 4)
            run_ids += quads[:, 0].tolist()
            starts += (quads[:, 1] + count).tolist()
            heads += [mm[a:b] for a, b in quads[:, 2:].tolist()]
        if blank_at:
            blanks += (np.frombuffer(blank_at, dtype=np.int64) + count).tolist()
        count += n
        dropped = _drop_pages(mm, dropped, end)  # the prefix in force and the heads are copies
        pos = end
    return Scanned(chunks, count, heads, run_ids, starts, blanks)


def _scan_rows_python(mm: mmap.mmap, start: int, section_at: int) -> Scanned | None:
    """The row splitter in Python: `mm.readline` (memchr and one copy, in C) hands over each row,
    `startswith` compares the prefix (memcmp): measured ~20% faster than slicing the prefix out of
    the mapping, comparing and `find`ing the newline; `mmap.find` for the prefix ~50% slower."""
    tails: list[bytes] = []
    heads: list[bytes] = []
    run_ids: list[int] = []
    starts: list[int] = []
    blanks: list[int] = []
    keep, match = tails.append, _head_pattern(section_at).match
    mm.seek(start)
    dropped = 0
    prefix = b"\n\n"  # matches no line: a line holds one newline, at its end
    plen = 2
    for line in iter(mm.readline, b""):
        if line.startswith(prefix):  # the prefix holds no newline: the row goes on
            keep(line[plen:])
            continue
        if mm.tell() - dropped > SCAN_WINDOW_BYTES:
            dropped = _drop_pages(mm, dropped, mm.tell() - len(line))  # up to where this line starts
        head = match(line)
        if head is None:
            if line.strip():
                return None  # text among the rows, unquoted cells, a newline inside a cell ...
            if not heads and line == b"\n":
                # an empty line before the first launch: declined, as the scan always has (the
                # pandas reader takes the file)
                return None
            blanks.append(len(tails))
            continue
        prefix = line[: head.end()]
        plen = len(prefix)
        heads.append(prefix[:-1])
        run_ids.append(int(head.group(1)))
        starts.append(len(tails))
        keep(line[plen:])
    return Scanned([b"".join(tails)], len(tails), heads, run_ids, starts, blanks)


def compiled_available() -> bool:
    """Whether the compiled twin was built (a C compiler at install time)."""
    return _compiled_scan() is not None and _compiled_split() is not None


def details_scan(export: text.Export, layout: Layout, *,
                 compiled: bool) -> tuple[np.ndarray, pa.Table, LongRows] | None:
    """Details page by prefix scan (see scan_rows): the compiled twin (rows and the tails' cells split in
    C) or the Python twin (rows split by `mm.readline`, the tails' cells by pyarrow), the same rows either
    way. None whenever anything else shows up, or the compiled twin was asked for and not built."""
    header = layout.header
    ncols = len(header)
    if export.gzipped or "Section Name" not in header:
        return None
    if compiled and not compiled_available():
        return None
    s = header.index("Section Name")
    detail_cols = [c for c in DETAILS_COLUMNS if c in header]
    if (any(header.index(c) >= s for c in layout.identity_columns)
            or any(header.index(c) < s for c in detail_cols)):
        return None
    # the width pyarrow reads: the ragged metric-row width, as read_blocks decides it
    ragged = text.ragged_width(export.first)
    width = ragged if ragged is not None and ragged < ncols else ncols
    if any(header.index(c) >= width for c in detail_cols):
        width = ncols
    names = header[s:width]
    split: Split | None
    if compiled:
        splitter = TailSplitter.start(names, ncols - s)
        if splitter is None:
            return None
        try:
            scanned = scan_rows(export, s, compiled=True, on_chunk=splitter.feed)
            if scanned is None or not scanned.count:
                return None
            # what the cell splitter does not vouch for goes to the robust reader: rare (a stray quote or
            # CR, a wide row with a metric), and re-splitting the tails with pyarrow would keep a third
            # reader alive for it
            split = splitter.result()
        finally:
            splitter.close()
        n = scanned.count
        scanned.chunks = []
    else:
        scanned = scan_rows(export, s, compiled=False)
        if scanned is None or not scanned.count:
            return None
        n = scanned.count
        chunks, scanned.chunks = scanned.chunks, []
        split = split_tails_pyarrow(b"".join(chunks), n, names, detail_cols, ncols - s)
        del chunks
    if split is None:
        return None
    metric_rows, coded, values = split
    starts = np.asarray(scanned.starts, dtype=np.int64)
    run_ids = np.asarray(scanned.run_ids, dtype=np.int64)
    ids = np.repeat(run_ids, np.diff(np.append(starts, n)))[metric_rows]
    lines = export.header_line + 1 + metric_rows
    if scanned.blanks:
        lines += np.searchsorted(np.asarray(scanned.blanks, dtype=np.int64), metric_rows, side="right")
    rows = LongRows(ids, lines, coded["Section Name"], coded["Body Item Label"], coded["Metric Name"],
                     coded["Metric Unit"], values)
    uids, first = np.unique(run_ids, return_index=True)  # a launch's identity: its first row in the file
    if len(scanned.heads) > len(uids):
        # rows of a launch that differ from its first row: their cells are not parsed, but must be text
        try:
            b"\n".join(scanned.heads).decode("utf-8")
        except UnicodeDecodeError:
            return None
    heads = [scanned.heads[i] for i in first.tolist()]
    try:
        ident_table = pacsv.read_csv(
            pa.py_buffer(b"\n".join(heads) + b"\n"),
            read_options=pacsv.ReadOptions(column_names=header[:s], use_threads=False),
            convert_options=pacsv.ConvertOptions(column_types={c: pa.string() for c in header[:s]},
                                                 include_columns=layout.identity_columns,
                                                 strings_can_be_null=False, quoted_strings_can_be_null=False),
        )
    except pa.ArrowInvalid:  # not UTF-8
        return None
    if ident_table.num_rows != len(heads):
        return None
    return uids, ident_table, rows


Split = tuple[np.ndarray, dict[str, tuple[np.ndarray, list[str]]], pa.Array | pa.ChunkedArray]


def _compiled_split() -> Callable[..., Any] | None:
    """The compiled cell splitter for tails (_rowscan.split_tails)."""
    return compiled_function("split_tails")


class TailSplitter:
    """The compiled cell splitter (split_tails in _rowscan.c) fed window by window while the scan goes
    on: each window is split on a worker thread (both run in C without the GIL, so on two cores they
    overlap), then the windows' keys are merged. result() is what the pyarrow route would return for
    the same tails (tests/importers/ncu/csv_export/test_ncu_csv_tails.py), or None where the splitter does not
    vouch for them: the pyarrow route reads them then."""

    def __init__(self, split: Callable[..., Any], names: list[str], max_fields: int) -> None:
        self._coded = [c for c in CODED_COLUMNS if c in names]
        self._names = names
        self._key_first = min(names.index(c) for c in self._coded)
        self._key_last = max(names.index(c) for c in self._coded)
        self._args = (len(names), max_fields, names.index("Metric Name"), self._key_first, self._key_last,
                      names.index("Metric Value"))
        self._split = split
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="nsroof-split")
        self._parts: list[tuple[int, Future[Any]]] = []

    @classmethod
    def start(cls, names: list[str], max_fields: int) -> TailSplitter | None:
        split = _compiled_split()
        if split is None or "Metric Value" not in names or "Metric Name" not in names:
            return None
        return cls(split, names, max_fields)

    def feed(self, tails: bytes, first_row: int) -> None:
        self._parts.append((first_row, self._pool.submit(self._split, [tails], *self._args)))

    def close(self) -> None:
        self._pool.shutdown(wait=True, cancel_futures=True)

    def result(self) -> Split | None:
        key_index: dict[bytes, int] = {}  # each distinct key once over all windows, first seen first
        rows: list[np.ndarray] = []
        key_codes: list[np.ndarray] = []
        values: list[pa.Array] = []
        for first_row, future in self._parts:
            got = future.result()
            if got is None:
                return None
            keys, codes_b, rows_b, offsets_b, values_b, _rules = got
            remap = np.array([key_index.setdefault(k, len(key_index)) for k in keys], dtype=np.int32)
            window_codes = np.frombuffer(codes_b, dtype=np.int32)
            key_codes.append(remap[window_codes])
            rows.append(np.frombuffer(rows_b, dtype=np.int64) + first_row)
            values.append(pa.StringArray.from_buffers(len(window_codes), pa.py_buffer(offsets_b),
                                                      pa.py_buffer(values_b)))
        try:  # each distinct key once: its cells as they stand in the file (quoted, one line)
            cells = [next(csv.reader([k.decode("utf-8")])) for k in key_index]
        except (UnicodeDecodeError, csv.Error, StopIteration):
            return None
        if any(len(row) != self._key_last - self._key_first + 1 for row in cells):
            return None
        metric_rows = np.concatenate(rows) if rows else np.zeros(0, np.int64)
        all_codes = np.concatenate(key_codes) if key_codes else np.zeros(0, np.int32)
        coded: dict[str, tuple[np.ndarray, list[str]]] = {}
        for col in CODED_COLUMNS:
            if col not in self._coded:
                coded[col] = (np.zeros(len(metric_rows), np.int32), [""])
                continue
            at = self._names.index(col) - self._key_first
            per_key, distinct = pd.factorize(np.array([row[at] for row in cells], dtype=object))
            coded[col] = (np.asarray(per_key, dtype=np.int32)[all_codes], [str(v) for v in distinct])
        return metric_rows, coded, pa.chunked_array(values, type=pa.string())


def split_tails_pyarrow(data: bytes, n: int, names: list[str], detail_cols: list[str],
                        max_fields: int) -> Split | None:
    """The Python twin's cell splitter: pyarrow parses the tails at the metric-row width (ragged rows
    natively), and only the few wider rule rows reach the invalid-row handler, which drops them when they
    carry no metric (exactly as details_robust drops them). None whenever anything else shows up."""
    metric_at = names.index("Metric Name")
    rule_rows: list[int] = []
    odd_rows: list[int | None] = []

    # a rule row as ncu writes it: wider than a metric row, no wider than the header, quoted, no metric
    rule_start = re.compile('(?:"(?:[^"]|"")*",){' + str(metric_at) + '}"",')

    def on_invalid(row: Any) -> str:
        if row.number is None:
            odd_rows.append(row.number)
        elif len(names) < row.actual_columns <= max_fields and rule_start.match(row.text):
            rule_rows.append(row.number)
        else:  # the same test, exactly, for anything less regular
            fields = csv_fields(row.text)
            if (fields is not None and len(fields) >= len(names) and fields[metric_at] == ""
                    and not any(f.strip() for f in fields[max_fields:])):
                rule_rows.append(row.number)
            else:
                odd_rows.append(row.number)
        return "skip"

    try:
        table = pacsv.read_csv(
            pa.py_buffer(data),
            # one thread: pipeline.analyze hashes the input on the other core meanwhile
            read_options=pacsv.ReadOptions(column_names=names, use_threads=False),
            parse_options=pacsv.ParseOptions(invalid_row_handler=on_invalid),
            # the text columns dictionary-encoded as they are parsed (few distinct values): their codes
            # come without a pass over the strings
            convert_options=pacsv.ConvertOptions(column_types={c: _DICT_TEXT if c in CODED_COLUMNS
                                                               else pa.string() for c in names},
                                                 include_columns=detail_cols, strings_can_be_null=False,
                                                 quoted_strings_can_be_null=False),
        )
    except (pa.ArrowInvalid, UnicodeDecodeError):
        return None
    if odd_rows or table.num_rows + len(rule_rows) != n:
        return None
    kept = np.ones(n, dtype=bool)
    kept[np.asarray(rule_rows, dtype=np.int64) - 1] = False  # row numbers count from 1
    has_metric = pc.not_equal(table.column("Metric Name"), "")
    has_np = np.asarray(has_metric.to_numpy(zero_copy_only=False), dtype=bool)
    metrics = table.filter(has_metric)
    codes: dict[str, tuple[np.ndarray, list[str]]] = {}
    for col in CODED_COLUMNS:
        codes[col] = (dict_codes(metrics.column(col)) if col in metrics.column_names
                      else (np.zeros(metrics.num_rows, np.int32), [""]))
    return np.flatnonzero(kept)[has_np], codes, metrics.column("Metric Value")
