"""Nsight Compute CSV exports -> the normalized kernel table (nsroof.importers.kernel_table).

    df = read("run.csv")       # details page (any of the three header layouts) or raw page

One row per kernel launch: identity columns from the export, every metric under its ncu name in SI
base units (float64), string metrics as strings, file facts in df.attrs["nsroof"].

How (../shared/docs/ncu-formats.md §1, §5), details page: three readers, fastest first, and an optional
fourth; each returns None for what it cannot vouch for and the next one takes the file (all give the
identical table: tests/importers/test_ncu_csv_fastpath.py).
  0. _details_polars (polars installed, >= POLARS_MIN_CPUS cores, plain files of >= POLARS_MIN_BYTES
     unless polars is imported already): polars' multi-threaded tokenizer over ID and the tail columns,
     then as 2., only where every launch's first row lies where the tail cells put it and no cell
     breaks a line.
  1. _details_scan (plain files): rows of one launch repeat its identity prefix byte for byte, so the
     mapped file is scanned once, each launch's first row parsed, every other row checked against the
     prefix and cut to its tail (section, metric, unit, value, rule cells) — in C (_rowscan.scan) where
     the extension was built, else in Python; the tails' cells are split in C (_rowscan.split_tails,
     window by window on a worker thread while the scan goes on) or, for what that declines, by pyarrow
     at the ragged metric-row width (rule rows go through its invalid-row handler).
  2. _details_pandas (gzip, or what the scan declines): pandas' C tokenizer over ID and the tail columns,
     each launch's identity read once from its first row.
  3. _details_robust: the file streamed in row-aligned blocks (gzip, BOM, CRLF and text before the
     header handled in nsroof.importers._ncutext) through pyarrow at the metric-row width; rows it
     rejects (text lines, rows broken by an unescaped quote in an NVTX range name) get a row-level
     repair, or an InputError naming their line.
Then, for the whole file at once: the number style is decided from all value cells
(nsroof.importers._ncunumbers), units are converted per distinct (metric, unit) pair (nsroof.units),
and values are scattered into a kernels x metrics array. The raw page (one row per launch) goes
through the block reader.
No per-cell Python on this path.
"""

from __future__ import annotations

import csv
import io
import mmap
import os
import re
import sys
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv

from nsroof._distinct import first_appearances
from nsroof.errors import InputError, UnitError
from nsroof.importers import _ncunumbers as numbers
from nsroof.importers import _ncutext as text
from nsroof.importers import names, nvtx
from nsroof.importers._nculabels import column_name, disambiguate
from nsroof.importers.kernel_table import assemble, fill_launch_identity
from nsroof.schema import IDENTITY_COLUMNS, FileFacts
from nsroof.units import UnknownUnitError, scale

FORMAT_DETAILS = "ncu-csv:details"
FORMAT_RAW = "ncu-csv:raw"
RAW_EXPORT_COMMAND = "ncu -i REPORT.ncu-rep --csv --page raw --print-units base"

# export column -> kernel-table identity column
_IDENTITY_MAP = {
    "ID": "kernel_id",
    "Process ID": "process_id",
    "Process Name": "process_name",
    "Host Name": "host",
    "Kernel Name": "kernel_name",
    "Context": "context",
    "Stream": "stream",
    "Block Size": "block",
    "Grid Size": "grid",
    "Device": "device_id",
    "CC": "cc",
}
_INT_IDENTITY = {"process_id", "context", "stream", "device_id"}
_DETAILS_COLUMNS = ("Section Name", "Body Item Label", "Metric Name", "Metric Unit", "Metric Value")
_CODED_COLUMNS = ("Section Name", "Body Item Label", "Metric Name", "Metric Unit")
_DICT_TEXT = pa.dictionary(pa.int32(), pa.string())

# Counters whose presence means the roofline can be computed (names from roofline-metrics.md §3-4).
_BYTES_PATTERN = re.compile(
    r"^(dram__bytes|dram__sectors|lts__t_bytes|lts__t_sectors|l1tex__t_bytes|l1tex__t_sectors|"
    r"derived__lts__lts2xbar|derived__l1tex__lsu_writeback|l1tex__lsu_writeback|lts__lts2xbar)"
)
_FLOPS_PATTERN = re.compile(r"^((sm|smsp)__sass_thread_inst_executed_op_|sm__ops_path_tensor_|derived__sm)")


@dataclass
class _Layout:
    header: list[str]
    page: str  # "details" or "raw"
    name: str  # "old" (Kernel Time), "new" (Block/Grid/Device/CC), "body-item"
    push_pop: str | None
    start_end: str | None

    @property
    def identity_columns(self) -> list[str]:
        cols = [c for c in self.header if c in _IDENTITY_MAP]
        cols += [c for c in (self.push_pop, self.start_end) if c]
        return cols


@dataclass
class _Collected:
    """What reading the rows noticed: row count, repaired rows, skipped text lines."""

    n_rows: int = 0
    bad_rows: list[tuple[int, str]] = field(default_factory=list)
    text_lines: list[tuple[int, str]] = field(default_factory=list)


def read(path: str | os.PathLike[str]) -> tuple[pd.DataFrame, FileFacts]:
    """Read an ncu CSV export (details or raw page) into the normalized kernel table and its file facts."""
    export = text.open_export(path)
    try:
        export.check_complete()
        layout = _layout(export)
        if layout.page == "details":
            return _read_details(export, layout)
        return _read_raw(export, layout)
    finally:
        export.close()


# ---------------------------------------------------------------------------------------------
# layout and blocks
# ---------------------------------------------------------------------------------------------


def _layout(export: text.Export) -> _Layout:
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
    return _Layout(header, page, name, push_pop, start_end)


def _read_blocks(
    export: text.Export, layout: _Layout, include: list[str], reduce: Callable[[pa.Table, np.ndarray], None]
) -> _Collected:
    """Parse every block and hand it (only `include` columns, with line numbers) to `reduce` at once,
    so no more than one block's rows is alive at a time.

    Details pages: metric rows end after `Metric Value` with a trailing comma, narrower than the header;
    only rule rows are full width. pyarrow parses the block with the narrow width, so the (many) metric
    rows go through the fast parser and the (few) rule rows come back through the invalid-row handler."""
    collected = _Collected()
    header = layout.header
    ncols = len(header)
    width: int | None = None
    for first_line, block in export.blocks():
        if width is None:
            ragged = text.ragged_width(block)
            width = ragged if ragged is not None and layout.page == "details" and ragged < ncols else ncols
            if width <= header.index("Kernel Name") or any(header.index(c) >= width for c in include):
                width = ncols
        names = header[:width]
        rejected: list[str] = []

        def on_invalid(row: Any, _rejected: list[str] = rejected) -> str:
            _rejected.append(row.text)
            return "skip"

        try:
            table = pacsv.read_csv(
                pa.py_buffer(block),
                read_options=pacsv.ReadOptions(column_names=names, use_threads=True, block_size=4 << 20),
                parse_options=pacsv.ParseOptions(invalid_row_handler=on_invalid, newlines_in_values=True),
                convert_options=pacsv.ConvertOptions(
                    column_types={c: pa.string() for c in names},
                    include_columns=include,
                    strings_can_be_null=False,
                    quoted_strings_can_be_null=False,
                ),
            )
        except pa.ArrowInvalid as exc:
            raise InputError(export.path, f"unreadable CSV block ({exc})", line=first_line,
                             hint=text.EXPORT_HINT) from None
        ok_lines, other_lines = _line_numbers(block, first_line, narrow=width < ncols)
        exact = len(ok_lines) == table.num_rows
        if not exact:  # blank lines or values with newlines: approximate
            ok_lines = np.arange(first_line, first_line + table.num_rows, dtype=np.int64)
        if rejected:
            extra, extra_lines = _repair(export, layout, include, width, rejected, block, first_line,
                                         other_lines, collected)
            if extra is not None:
                table = pa.concat_tables([table, extra.select(table.column_names)])
                ok_lines = np.concatenate([ok_lines, extra_lines])
                if exact and len(other_lines) == len(rejected):
                    # repaired rows back in file order: column order and the first of repeated
                    # metrics follow the file, as in the other readers
                    order = np.argsort(ok_lines, kind="stable")
                    table, ok_lines = table.take(pa.array(order)), ok_lines[order]
        reduce(table, ok_lines)
        collected.n_rows += table.num_rows
        del table
    return collected


def _line_numbers(block: memoryview, first_line: int, *, narrow: bool) -> tuple[np.ndarray, np.ndarray]:
    """Line numbers of the rows pyarrow keeps (narrow: rows ending in a trailing comma) and of the others."""
    buf = np.frombuffer(block, dtype=np.uint8)
    nl = np.flatnonzero(buf == 10)
    if not narrow:
        return first_line + np.arange(len(nl), dtype=np.int64), np.zeros(0, np.int64)
    prev = buf[np.maximum(nl - 1, 0)].copy()
    cr = prev == 13
    prev[cr] = buf[np.maximum(nl[cr] - 2, 0)]
    ragged = prev == 44
    return first_line + np.flatnonzero(ragged), first_line + np.flatnonzero(~ragged)


def _repair(
    export: text.Export,
    layout: _Layout,
    include: list[str],
    width: int,
    rejected: list[str],
    block: memoryview,
    first_line: int,
    other_lines: np.ndarray,
    collected: _Collected,
) -> tuple[pa.Table | None, np.ndarray]:
    """Rows pyarrow rejected: rule rows (full width) are cut to the parsed width, text lines are dropped
    (with a warning), rows broken by an unescaped quote in an NVTX name are rebuilt; anything else is
    an InputError naming its line."""
    header = layout.header
    ncols = len(header)
    fixed: list[list[str]] = []
    lines: list[int] = []
    in_order = len(other_lines) == len(rejected)
    for i, raw in enumerate(rejected):
        line = int(other_lines[i]) if in_order else first_line
        stripped = raw.strip()
        if not stripped:
            continue
        if not stripped.startswith('"'):
            collected.text_lines.append((line if in_order else _line_of(block, raw, first_line), stripped))
            continue
        fields = _csv_fields(raw)
        if fields is not None and len(fields) >= width and not any(f.strip() for f in fields[ncols:]):
            fixed.append(fields[:width])
            lines.append(line)
            continue
        if fields is not None and len(fields) < width and _only_trailing_missing(layout, len(fields)):
            fixed.append(fields + [""] * (width - len(fields)))
            lines.append(line)
            continue
        recovered = _recover_nvtx_row(layout, raw)
        if recovered is not None:
            collected.bad_rows.append((line if in_order else _line_of(block, raw, first_line), raw))
            fixed.append(recovered[:width])
            lines.append(line)
            continue
        got = "?" if fields is None else str(len(fields))
        cause = (
            f"row has {got} fields, the header has {ncols}"
            if fields is not None
            else "row ends inside a quoted field"
        )
        raise InputError(export.path, f"{cause}: the export is truncated or damaged",
                         line=line if in_order else _line_of(block, raw, first_line),
                         hint="re-export the report; " + text.EXPORT_HINT)
    if not fixed:
        return None, np.zeros(0, np.int64)
    cols = {c: pa.array([row[header.index(c)] for row in fixed], type=pa.string()) for c in include}
    return pa.table(cols), np.asarray(lines, dtype=np.int64)


def _line_of(block: memoryview, raw: str, first_line: int) -> int:
    """Line of a rejected row (error paths only: it scans the block)."""
    data = bytes(block)
    pos = data.find(raw.encode("utf-8")[:200])
    return first_line + data.count(b"\n", 0, pos) if pos >= 0 else first_line


def _csv_fields(raw: str) -> list[str] | None:
    try:
        reader = csv.reader(io.StringIO(raw), strict=True)
        rows = list(reader)
    except csv.Error:
        return None
    if len(rows) != 1:
        return None
    return rows[0]


def _csv_rows(texts: list[str]) -> list[list[str]] | None:
    """Each text parsed as exactly one CSV row, by one reader for all (a reader per row costs more than
    the parsing); None when one is not (an unclosed quote runs into the next text, or an error)."""
    try:
        rows = list(csv.reader(texts, strict=True))
    except csv.Error:
        return None
    return rows if len(rows) == len(texts) else None


def _only_trailing_missing(layout: _Layout, n: int) -> bool:
    """A short row is fine when what it lacks is only rule columns (details) — never metric values."""
    return layout.page == "details" and n > layout.header.index("Metric Value")


def _recover_nvtx_row(layout: _Layout, raw: str) -> list[str] | None:
    """Rebuild a row whose NVTX push/pop cell holds an unescaped quote (ncu does not escape it).

    Fields before the NVTX column and after it are intact: parse the row from both ends and give the
    NVTX cell whatever lies between."""
    if layout.push_pop is None:
        return None
    header = layout.header
    k = header.index(layout.push_pop)
    n_after = len(header) - k - 1
    line = raw.rstrip("\r\n")
    left = re.match(r'^((?:"(?:[^"]|"")*",){' + str(k) + "})", line)
    if left is None:
        return None
    head_fields = next(csv.reader([left.group(1)[:-1]]))
    right = re.search(r'((?:,"(?:[^"]|"")*"){' + str(n_after) + "})$", line) if n_after else None
    if n_after and right is None:
        return None
    tail_text = right.group(1) if right is not None else ""
    tail_fields = next(csv.reader([tail_text[1:]])) if tail_text else []
    if len(tail_fields) != n_after:
        return None
    middle = line[len(left.group(1)) : len(line) - len(tail_text)]
    if not (middle.startswith('"') and middle.endswith('"')):
        return None
    cell = middle[1:-1].replace('""', '"')
    return head_fields + [cell] + tail_fields


# ---------------------------------------------------------------------------------------------
# identity
# ---------------------------------------------------------------------------------------------


def _ids(export: text.Export, column: pa.ChunkedArray | pa.Array, lines: np.ndarray) -> np.ndarray:
    cleaned = pc.replace_substring_regex(numbers._as_strings(column), r"[,.\s]", "")
    ok = pc.match_substring_regex(cleaned, r"^\d+$")
    okn = np.asarray(ok.to_numpy(zero_copy_only=False), dtype=bool)
    if not okn.all():
        bad = int(np.flatnonzero(~okn)[0])
        raise InputError(export.path, f"launch ID {column[bad].as_py()!r} is not a number", line=int(lines[bad]),
                         hint="the row is damaged or not part of an ncu export; " + text.EXPORT_HINT)
    return np.asarray(pc.cast(cleaned, pa.int64()).to_numpy(zero_copy_only=False), dtype=np.int64)


def _first_per_id(table: pa.Table, ids: np.ndarray) -> tuple[np.ndarray, pa.Table]:
    uniq, first = np.unique(ids, return_index=True)
    order = np.argsort(first, kind="stable")
    return uniq[order], table.take(pa.array(first[order]))


def _texts(column: pa.ChunkedArray | pa.Array) -> list[str]:
    """A text column as Python strings, one object per distinct value: launches repeat a few kernel
    names (~1 KB each for templated kernels), so each is decoded once and later hashing (short names,
    factorising, Parquet) works on shared, already-hashed objects."""
    codes, names = _codes(column)
    distinct = np.empty(len(names), dtype=object)
    distinct[:] = names
    return list(distinct[codes])


def _identity_frame(export: text.Export, layout: _Layout, ids: np.ndarray, table: pa.Table) -> pd.DataFrame:
    """One row per launch, kernel-table identity columns, in ID order."""
    if len(ids) > 1 and not bool(np.all(ids[1:] >= ids[:-1])):  # ncu numbers launches in file order
        order = np.argsort(ids, kind="stable")
        ids = ids[order]
        table = table.take(pa.array(order))
    n = len(ids)
    cols: dict[str, Any] = {"source": [export.path.name] * n, "kernel_id": ids.astype(np.int64)}
    for src, dst in _IDENTITY_MAP.items():
        if dst == "kernel_id":
            continue
        if src not in table.column_names:
            continue
        values = table.column(src)
        if dst in _INT_IDENTITY:
            cleaned = pc.replace_substring_regex(values, r"[,.\s]", "")
            ok = pc.match_substring_regex(cleaned, r"^-?\d+$")
            as_int = pc.cast(pc.if_else(ok, cleaned, pa.scalar(None, pa.string())), pa.int64()).combine_chunks()
            cols[dst] = pd.arrays.IntegerArray(
                np.asarray(as_int.fill_null(0).to_numpy(zero_copy_only=False), dtype=np.int64),
                np.asarray(as_int.is_null().to_numpy(zero_copy_only=False), dtype=bool))
        elif dst == "cc":
            cols[dst] = [v.replace(",", ".") for v in _texts(values)]
        else:
            cols[dst] = _texts(values)
    if "kernel_name" in cols:
        cols["function"] = [names.short_name(k) for k in cols["kernel_name"]]
    push = _texts(table.column(layout.push_pop)) if layout.push_pop else [""] * n
    start = _texts(table.column(layout.start_end)) if layout.start_end else [""] * n
    ranges = [list(nvtx.ranges(a, b)) for a, b in zip(push, start, strict=True)]
    cols["nvtx_ranges"] = ranges
    cols["nvtx_path"] = [nvtx.path(r) for r in ranges]
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


# ---------------------------------------------------------------------------------------------
# details page
# ---------------------------------------------------------------------------------------------


@dataclass
class _LongRows:
    """The details page's metric rows, compact: one entry per (launch, metric) row."""

    kernel_ids: np.ndarray  # int64 launch ID per row
    lines: np.ndarray  # line number per row (approximate when values span lines)
    section: tuple[np.ndarray, list[str]]  # (codes, names)
    body: tuple[np.ndarray, list[str]]
    metric: tuple[np.ndarray, list[str]]
    unit: tuple[np.ndarray, list[str]]
    values: pa.Array | pa.ChunkedArray


def _read_details(export: text.Export, layout: _Layout) -> tuple[pd.DataFrame, FileFacts]:
    collected = _Collected()
    fast = _details_fast(export, layout)
    if fast is not None:
        uids, ident_table, rows = fast
    else:
        uids, ident_table, rows = _details_robust(export, layout, collected)
    warnings: list[str] = []
    hints: list[str] = []
    columns: dict[str, Any] = {}
    units: dict[str, str] = {}
    style = numbers.StyleDecision("C", "no numbers")
    # the value cells are parsed on a worker thread (Arrow compute, mostly without the GIL) while the
    # identity table is built here (Python)
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="nsroof-numbers") as pool:
        parsing = pool.submit(_parse_values, export, rows) if len(rows.kernel_ids) else None
        identity = _identity_frame(export, layout, uids, ident_table)
        kernel_ids = identity["kernel_id"].to_numpy()
        if parsing is not None:
            kidx = _positions(kernel_ids, rows.kernel_ids)
            columns, units, style = _pivot_details(export, rows, kidx, len(kernel_ids), parsing)
    frame = assemble(identity, columns)
    fill_launch_identity(frame)
    return frame, _finish(export, layout, frame, units, style, collected, warnings, hints, FORMAT_DETAILS)


def _positions(sorted_ids: np.ndarray, ids: np.ndarray) -> np.ndarray:
    """Where each of `ids` (all among `sorted_ids`, ascending and distinct) stands in `sorted_ids`. ncu
    numbers launches 0, 1, 2 …: a lookup table then, one gather (a binary search per row cost 5-7 ms
    for 208,000 rows); a search for IDs far apart."""
    if len(sorted_ids) and sorted_ids[0] >= 0 and sorted_ids[-1] < 4 * len(sorted_ids) + 4096:
        table = np.zeros(int(sorted_ids[-1]) + 1, dtype=np.int64)
        table[sorted_ids] = np.arange(len(sorted_ids))
        return table[ids]
    return np.searchsorted(sorted_ids, ids)


def _details_fast(export: text.Export, layout: _Layout) -> tuple[np.ndarray, pa.Table, _LongRows] | None:
    """The common case, without the row-level repairs of _details_robust: the prefix scan for plain
    files (_details_scan), pandas' C tokenizer for gzip or whatever the scan cannot vouch for
    (_details_pandas); with polars installed and cores to spare, polars' tokenizer first
    (_details_polars, plain files whose byte layout it verifies). None sends the file to _details_robust."""
    readers = [_details_scan, _details_pandas]
    if _polars_may_pay(export):
        readers.insert(0, _details_polars)
    for reader in readers:
        rows = reader(export, layout)
        if rows is not None:
            return rows
    return None


# polars tokenizes every byte of the file on all cores and holds the whole file in memory; the scan skips
# the repeated identity prefixes (a memcmp per row) on one core. On the 2-core machine (254 MB benchmark
# export, the input hashed on the other core meanwhile, docs/readme/importer.md) polars' read alone took
# as long as the whole scan and added the file's size to the peak RSS, so it goes first only where it
# has more cores to use: from 4 on (its read went 0.33 -> 0.23 s from 1 to 2 threads). And importing
# polars takes 0.15-0.3 s, what the scan needs for ~100 MB: unless it is imported already, only for
# files from POLARS_MIN_BYTES on.
POLARS_MIN_CPUS = 4
POLARS_MIN_BYTES = 128 << 20


def _polars_may_pay(export: text.Export) -> bool:
    if export.gzipped or _usable_cpus() < POLARS_MIN_CPUS:
        return False
    if "polars" in sys.modules:
        return sys.modules["polars"] is not None
    try:
        return export.path.stat().st_size >= POLARS_MIN_BYTES
    except OSError:
        return False


def _usable_cpus() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


# Rows of one launch repeat its identity prefix (ID ... CC, with the kernel name and NVTX cells: ~93% of
# a large export's bytes) byte for byte, so only each launch's first row is parsed in full; every
# other row is checked against the prefix (a memcmp) and only its tail (section, metric, unit,
# value, rule fields) is kept. The tails, ~7% of the file, then go through pyarrow's CSV parser.
_SCAN_WINDOW_BYTES = 16 << 20


@dataclass
class _Scanned:
    chunks: list[bytes]  # every row from `Section Name` on, line end kept, file order; whole rows per chunk
    count: int  # rows in the chunks (each ends in its only newline)
    heads: list[bytes]  # the identity prefix of each run of rows sharing one (its cells, no final comma)
    run_ids: list[int]  # the launch ID of each run
    starts: list[int]  # index (among the rows) of each run's first row
    blanks: list[int]  # per skipped blank line: the index of the row after it


def _compiled(name: str) -> Callable[..., Any] | None:
    """A function of the compiled splitter (nsroof/importers/_rowscan.c), None where it was not built."""
    try:
        from nsroof.importers import _rowscan  # type: ignore[attr-defined]
    except ImportError:
        return None
    function: Callable[..., Any] = getattr(_rowscan, name)
    return function


def _compiled_scan() -> Callable[..., Any] | None:
    """The compiled row splitter (_rowscan.scan)."""
    return _compiled("scan")


# the identity prefix: `section_at` cells quoted the way ncu quotes (inner quotes doubled), the first
# one a launch ID; a match lies within one line and ends where `Section Name` begins
def _head_pattern(section_at: int) -> re.Pattern[bytes]:
    return re.compile(rb'"([0-9]+)",(?:"[^"\n]*(?:""[^"\n]*)*",){' + str(section_at - 1).encode() + rb"}")


def _scan_rows(
    export: text.Export,
    section_at: int,
    *,
    compiled: bool = True,
    on_chunk: Callable[[bytes, int], None] | None = None,
) -> _Scanned | None:
    """Split every row after the header into its identity prefix and its tail (see above). None when
    a row is not what ncu writes: a cell not quoted the way ncu quotes, a non-numeric ID (text among
    the rows), a newline inside the identity cells, bytes that are not UTF-8, no final newline.
    The compiled splitter and the Python loop give the same result (tests/importers/test_ncu_csv_scan.py);
    the compiled one also declines IDs of more than 18 digits (int64). `on_chunk(tails, first_row)` is
    handed each window's tails as soon as they are split (the Python loop: all of them at the end)."""
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
) -> _Scanned | None:
    """One call of the compiled splitter per window of _SCAN_WINDOW_BYTES (it reads each row whole)."""
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
        got = scan(mm, pos, min(size, pos + _SCAN_WINDOW_BYTES), prefix, section_at, have_heads)
        if got is None:
            return None
        data, n, runs, blank_at, end, prefix, have_heads = got
        chunks.append(data)
        if on_chunk is not None:
            on_chunk(data, count)
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
    return _Scanned(chunks, count, heads, run_ids, starts, blanks)


def _scan_rows_python(mm: mmap.mmap, start: int, section_at: int) -> _Scanned | None:
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
        if mm.tell() - dropped > _SCAN_WINDOW_BYTES:
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
    return _Scanned([b"".join(tails)], len(tails), heads, run_ids, starts, blanks)


def _details_scan(export: text.Export, layout: _Layout) -> tuple[np.ndarray, pa.Table, _LongRows] | None:
    """Details page by prefix scan (see _scan_rows); the tails' cells split by the compiled splitter
    (_split_tails_compiled) or, for what it does not vouch for, by pyarrow (_split_tails_pyarrow): the
    same rows either way. None whenever anything else shows up."""
    header = layout.header
    ncols = len(header)
    if export.gzipped or "Section Name" not in header:
        return None
    s = header.index("Section Name")
    detail_cols = [c for c in _DETAILS_COLUMNS if c in header]
    if any(header.index(c) >= s for c in layout.identity_columns) or any(header.index(c) < s for c in detail_cols):
        return None
    # the width pyarrow reads: the ragged metric-row width, as _read_blocks decides it
    ragged = text.ragged_width(export.first)
    width = ragged if ragged is not None and ragged < ncols else ncols
    if any(header.index(c) >= width for c in detail_cols):
        width = ncols
    names = header[s:width]
    splitter = _TailSplitter.start(names, ncols - s)
    try:
        scanned = _scan_rows(export, s, on_chunk=splitter.feed if splitter is not None else None)
        if scanned is None or not scanned.count:
            return None
        split = splitter.result() if splitter is not None else None
    finally:
        if splitter is not None:
            splitter.close()
    n = scanned.count
    chunks, scanned.chunks = scanned.chunks, []
    if split is None:
        split = _split_tails_pyarrow(b"".join(chunks), n, names, detail_cols, ncols - s)
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
    rows = _LongRows(ids, lines, coded["Section Name"], coded["Body Item Label"], coded["Metric Name"],
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
                                                 include_columns=layout.identity_columns, strings_can_be_null=False,
                                                 quoted_strings_can_be_null=False),
        )
    except pa.ArrowInvalid:  # not UTF-8
        return None
    if ident_table.num_rows != len(heads):
        return None
    return uids, ident_table, rows


_Split = tuple[np.ndarray, dict[str, tuple[np.ndarray, list[str]]], pa.Array | pa.ChunkedArray]


def _compiled_split() -> Callable[..., Any] | None:
    """The compiled cell splitter for tails (_rowscan.split_tails)."""
    return _compiled("split_tails")


class _TailSplitter:
    """The compiled cell splitter (split_tails in _rowscan.c) fed window by window while the scan goes
    on: each window is split on a worker thread (both run in C without the GIL, so on two cores they
    overlap), then the windows' keys are merged. result() is what the pyarrow route would return for
    the same tails (tests/importers/test_ncu_csv_tails.py), or None where the splitter does not vouch
    for them: the pyarrow route reads them then."""

    def __init__(self, split: Callable[..., Any], names: list[str], max_fields: int) -> None:
        self._coded = [c for c in _CODED_COLUMNS if c in names]
        self._names = names
        self._key_first = min(names.index(c) for c in self._coded)
        self._key_last = max(names.index(c) for c in self._coded)
        self._args = (len(names), max_fields, names.index("Metric Name"), self._key_first, self._key_last,
                      names.index("Metric Value"))
        self._split = split
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="nsroof-split")
        self._parts: list[tuple[int, Future[Any]]] = []

    @classmethod
    def start(cls, names: list[str], max_fields: int) -> _TailSplitter | None:
        split = _compiled_split()
        if split is None or "Metric Value" not in names or "Metric Name" not in names:
            return None
        return cls(split, names, max_fields)

    def feed(self, tails: bytes, first_row: int) -> None:
        self._parts.append((first_row, self._pool.submit(self._split, [tails], *self._args)))

    def close(self) -> None:
        self._pool.shutdown(wait=True, cancel_futures=True)

    def result(self) -> _Split | None:
        key_index: dict[bytes, int] = {}  # each distinct key once over all windows, first seen first
        rows: list[np.ndarray] = []
        key_codes: list[np.ndarray] = []
        values: list[pa.Array] = []
        for first_row, future in self._parts:
            got = future.result()
            if got is None:
                return None
            keys, codes_b, rows_b, offsets_b, values_b, _rules = got
            remap = np.array([key_index.setdefault(k, len(key_index)) for k in keys], dtype=np.int64)
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
        all_codes = np.concatenate(key_codes) if key_codes else np.zeros(0, np.int64)
        coded: dict[str, tuple[np.ndarray, list[str]]] = {}
        for col in _CODED_COLUMNS:
            if col not in self._coded:
                coded[col] = (np.zeros(len(metric_rows), np.int64), [""])
                continue
            at = self._names.index(col) - self._key_first
            per_key, distinct = pd.factorize(np.array([row[at] for row in cells], dtype=object))
            coded[col] = (np.asarray(per_key, dtype=np.int64)[all_codes], [str(v) for v in distinct])
        return metric_rows, coded, pa.chunked_array(values, type=pa.string())


def _split_tails_compiled(chunks: list[bytes], names: list[str], max_fields: int) -> _Split | None:
    """The tails' metric rows by the compiled splitter, all chunks at once (each chunk whole rows)."""
    splitter = _TailSplitter.start(names, max_fields)
    if splitter is None:
        return None
    try:
        first_row = 0
        for chunk in chunks:
            splitter.feed(chunk, first_row)
            first_row += chunk.count(b"\n")
        return splitter.result()
    finally:
        splitter.close()


def _split_tails_pyarrow(data: bytes, n: int, names: list[str], detail_cols: list[str], max_fields: int) -> _Split | None:
    """pyarrow parses the tails at the metric-row width (ragged rows natively), and only the few wider
    rule rows reach the invalid-row handler, which drops them when they carry no metric (exactly as
    _details_robust drops them). None whenever anything else shows up."""
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
            fields = _csv_fields(row.text)
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
            convert_options=pacsv.ConvertOptions(column_types={c: _DICT_TEXT if c in _CODED_COLUMNS else pa.string()
                                                               for c in names},
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
    for col in _CODED_COLUMNS:
        codes[col] = (_codes(metrics.column(col)) if col in metrics.column_names
                      else (np.zeros(metrics.num_rows, np.int64), [""]))
    return np.flatnonzero(kept)[has_np], codes, metrics.column("Metric Value")


def _details_pandas(export: text.Export, layout: _Layout) -> tuple[np.ndarray, pa.Table, _LongRows] | None:
    """At the speed of pandas' C tokenizer: only the ID, section, metric, unit and
    value columns are converted (categoricals: few distinct values), and each launch's identity (the
    long kernel name, NVTX cells) is parsed once, from its first row, located by byte offset (see
    _identity_by_offsets). Returns None whenever the file needs the row-level repairs of
    _details_robust (rows wider than the header, text lines among the rows, damaged IDs ...)."""
    if "Section Name" not in layout.header:
        return None
    try:
        df = _read_columns(export, _tail_use(layout))
    except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError, ValueError):
        return None
    return _details_from_columns(export, layout, df, exact=False)


def _details_polars(export: text.Export, layout: _Layout) -> tuple[np.ndarray, pa.Table, _LongRows] | None:
    """_details_pandas with polars' multi-threaded tokenizer (the optional `fast` extra; None when
    polars is not installed), for plain files only, and only where the byte layout is verified:
    every launch's first row found where the tail cells put it and the last launch ending at the end
    of the file (_identity_by_offsets, no search fallback), no cell holding a line break, so every
    row is one line and the line numbers are exact. Anything else (blank or text lines among the
    rows, unquoted cells, rows wider than the header, bytes that are not UTF-8, whatever polars
    raises) returns None and the next reader takes the file."""
    if export.gzipped or "Section Name" not in layout.header:
        return None
    df = _read_columns_polars(export, layout, _tail_use(layout))
    if df is None:
        return None
    return _details_from_columns(export, layout, df, exact=True)


def _tail_use(layout: _Layout) -> list[str]:
    """The columns the tokenizer readers convert: ID and every column from `Section Name` on."""
    header = layout.header
    return ["ID"] + header[header.index("Section Name"):]


def _details_from_columns(
    export: text.Export, layout: _Layout, df: pd.DataFrame | None, *, exact: bool
) -> tuple[np.ndarray, pa.Table, _LongRows] | None:
    """The details-page triple from a _read_columns frame. exact: the line numbers must be exact and
    every launch's first row found by offset (else None); otherwise it searches for them."""
    if df is None or len(df) == 0:
        return None
    id_codes = df["ID"].cat.codes.to_numpy().astype(np.int64)
    id_texts = [str(x) for x in df["ID"].cat.categories]
    if any(not (t.isascii() and t.isdigit()) for t in id_texts) or (id_codes < 0).any():
        return None  # text lines among the rows, or a damaged ID: let the robust path name the line
    if exact and _breaks_lines(df):
        return None
    id_values = np.asarray([int(t) for t in id_texts], dtype=np.int64)
    ids = id_values[id_codes]
    order = np.sort(np.unique(id_codes, return_index=True)[1])  # first row of each launch, file order
    first_texts = [id_texts[int(id_codes[r])] for r in order]
    ident_rows = None
    if not export.gzipped:
        ident_rows = _identity_by_offsets(export, layout, df, order, first_texts)
    if ident_rows is None and not exact:
        ident_rows = _identity_rows(export, layout, first_texts, np.diff(order))
    if ident_rows is None:
        return None
    if exact and any("\r" in f for row in ident_rows for f in row):
        return None  # other CSV readers end a row at a lone CR
    lines = export.header_line + 1 + np.arange(len(df), dtype=np.int64)
    return _long_rows(layout, df, ids, lines, ids[order], ident_rows)


def _breaks_lines(df: pd.DataFrame) -> bool:
    """Whether a cell holds a line break (a CR or LF): the row then spans lines, or other CSV readers
    end it there. Searched in each column's distinct values, or in its string data at once."""
    for c in df.columns:
        col = df[c]
        if isinstance(col.dtype, pd.CategoricalDtype):
            data = "".join(str(v) for v in col.cat.categories).encode()
        else:
            arr = pa.array(col)
            chunks = arr.chunks if isinstance(arr, pa.ChunkedArray) else [arr]
            data = b"".join(_string_bytes(ch) for ch in chunks)
        if b"\n" in data or b"\r" in data:
            return True
    return False


def _string_bytes(arr: pa.Array) -> bytes:
    """The UTF-8 bytes of all the values of a string array, concatenated."""
    if not (pa.types.is_string(arr.type) or pa.types.is_large_string(arr.type)):
        arr = arr.cast(pa.large_string())
    offsets = np.frombuffer(arr.buffers()[1], dtype=np.int64 if pa.types.is_large_string(arr.type) else np.int32)
    offsets = offsets[arr.offset : arr.offset + len(arr) + 1]
    data = arr.buffers()[2]
    if data is None or len(offsets) < 2:
        return b""
    return data.to_pybytes()[int(offsets[0]) : int(offsets[-1])]


def _read_columns(export: text.Export, use: list[str]) -> pd.DataFrame:
    """pandas' C parser over the rows, only `use` converted (categoricals, but Metric Value: few distinct
    values, so no per-row string objects). Splitting the file across two threads was measured and did not
    pay on a shared 2-core machine."""
    stream = export.reopen()
    try:
        return pd.read_csv(stream, header=0, usecols=use, engine="c", na_filter=False, skip_blank_lines=True,
                           dtype={c: ("str" if c == "Metric Value" else "category") for c in use})
    finally:
        stream.close()


def _read_columns_polars(export: text.Export, layout: _Layout, use: list[str]) -> pd.DataFrame | None:
    """_read_columns with polars' tokenizer (plain files): the same frame, or None when polars is not
    installed or raises (rows wider than the header, bytes that are not UTF-8 ...).

    Every row is read against the full header (polars raises on a wider row, pads a narrower one with
    empty strings, so a metric row's missing rule cells read as ""); the preamble and the header are
    skipped as lines (they are text, not CSV), a BOM with them. Categoricals are built in polars (each
    column's distinct values in order of appearance, then its codes)."""
    try:
        import polars as pl
    except ImportError:
        return None
    header = layout.header
    cats = [c for c in use if c != "Metric Value"]
    try:
        frame = pl.read_csv(
            export.path, has_header=False, skip_lines=export.header_line,
            schema={c: pl.String for c in header}, columns=[header.index(c) for c in use],
            infer_schema=False, empty_string_is_null=False, missing_columns="insert", truncate_ragged_lines=False,
            encoding="utf8", raise_if_empty=False,
        )
        # a column no row reaches reads as null: fine for the rule columns, not up to the value
        needed = [c for c in use if header.index(c) <= header.index("Metric Value")]
        if frame.height == 0 or frame.select(pl.sum_horizontal(pl.col(needed).null_count())).item():
            return None
        frame = frame.fill_null("")  # rule columns no row of the file reaches
        values = frame.select([pl.col(c).unique(maintain_order=True).implode() for c in cats]).row(0)
        codes = frame.select([pl.col(c).cast(pl.Enum(v)).to_physical() for c, v in zip(cats, values, strict=True)])
        metric_values = frame.get_column("Metric Value").to_arrow(compat_level=pl.CompatLevel.oldest())
    except (pl.exceptions.PolarsError, pl.exceptions.PanicException, OSError, ValueError):
        return None
    out: dict[str, Any] = {}
    for c, v in zip(cats, values, strict=True):
        # object categories: they are iterated in Python (names, byte lengths), which is slow on str dtype
        out[c] = pd.Categorical.from_codes(codes.get_column(c).to_numpy(), categories=pd.Index(list(v), dtype=object))
    out["Metric Value"] = pd.array(metric_values, dtype="str")
    return pd.DataFrame({c: out[c] for c in use})


def _long_rows(
    layout: _Layout, df: pd.DataFrame, ids: np.ndarray, lines: np.ndarray, first_ids: np.ndarray,
    ident_rows: list[list[str]],
) -> tuple[np.ndarray, pa.Table, _LongRows]:
    """(sorted launch IDs, their identity columns, the metric rows) from a frame of the rows' tail
    columns (Section Name onward, categoricals but Metric Value) and each launch's first row."""
    header = layout.header
    at = {c: header.index(c) for c in layout.identity_columns}
    ident_table = pa.table({c: pa.array([r[i] for r in ident_rows], type=pa.string()) for c, i in at.items()})
    srt = np.argsort(first_ids, kind="stable")
    uids, ident_table = first_ids[srt], ident_table.take(pa.array(srt))
    keep = (df["Metric Name"] != "").to_numpy()

    def codes(col: str) -> tuple[np.ndarray, list[str]]:
        if col not in df.columns:
            return np.zeros(int(keep.sum()), np.int64), [""]
        c = df[col]
        return c.cat.codes.to_numpy()[keep].astype(np.int64), [str(x) for x in c.cat.categories]

    values = pa.array(df["Metric Value"]).filter(pa.array(keep))
    rows = _LongRows(ids[keep], lines[keep], codes("Section Name"), codes("Body Item Label"), codes("Metric Name"),
                     codes("Metric Unit"), values)
    return uids, ident_table, rows


def _quoted_bytes(col: pd.Series) -> np.ndarray:
    """Bytes each cell takes in the file: ncu quotes every value and doubles inner quotes."""
    if isinstance(col.dtype, pd.CategoricalDtype):
        per = np.array([len(str(c).encode()) + 2 + str(c).count('"') for c in col.cat.categories] + [-(1 << 40)],
                       dtype=np.int64)
        return per[col.cat.codes.to_numpy()]  # code -1 (no value) -> hugely negative: the check fails
    arr = pa.array(col)
    length = pc.binary_length(arr).to_numpy(zero_copy_only=False).astype(np.int64)
    quotes = pc.count_substring(arr, '"').to_numpy(zero_copy_only=False).astype(np.int64)
    return length + 2 + quotes


def _identity_by_offsets(
    export: text.Export, layout: _Layout, df: pd.DataFrame, order: np.ndarray, id_texts: list[str]
) -> list[list[str]] | None:
    """First row of each launch by seeking straight to it.

    Rows of one launch share their identity prefix byte for byte, and the rest of each row (section,
    metric, unit, value, rule fields) is in `df`, so the byte length of every row is known once the
    prefix length P is read from the launch's first row: metric rows stop after `Metric Value` with a
    trailing comma, rule rows are full width, every value is quoted. Each seek is checked against the
    launch ID; any mismatch (blank lines, unusual quoting) returns None and the caller searches instead."""
    header = layout.header
    ncols = len(header)
    s = header.index("Section Name")
    width = text.ragged_width(export.first) or ncols
    ragged = (df["Metric Name"] != "").to_numpy() if width < ncols else np.zeros(len(df), bool)
    full_tail = np.zeros(len(df), np.int64)
    ragged_tail = np.zeros(len(df), np.int64)
    for j, c in enumerate(header[s:]):
        q = _quoted_bytes(df[c])
        full_tail += q
        if s + j <= width - 2:
            ragged_tail += q
    full_tail += ncols - s - 1  # commas between the tail fields
    ragged_tail += width - s - 1  # ... the last one before the empty trailing field
    tail = np.where(ragged, ragged_tail, full_tail)
    row_rest = tail + 1 + len(export.newline)  # comma before Section Name, tail, newline
    if (row_rest <= 0).any():
        return None
    group_rest = np.add.reduceat(row_rest, order)
    counts = np.diff(np.append(order, len(df)))
    texts: list[str] = []
    need = max(header.index(c) for c in layout.identity_columns) + 1
    pos = export.data_offset
    with open(export.path, "rb") as fh:
        for k, id_text in enumerate(id_texts):
            fh.seek(pos)
            line = fh.readline()
            if not line.startswith(b'"' + id_text.encode() + b'",'):
                return None
            prefix = len(line) - int(row_rest[order[k]])
            if prefix <= 0:
                return None
            texts.append(line[:prefix].decode("utf-8", errors="replace"))
            pos += prefix * int(counts[k]) + int(group_rest[k])
        # the last launch must end where the file does (bar blank lines, or a final row without its
        # newline): otherwise its rows are not what the arithmetic assumed
        size = os.fstat(fh.fileno()).st_size
        if pos > size:
            fh.seek(size - 1)
            if pos - size != len(export.newline) or fh.read(1) == b"\n":
                return None
        elif size - pos > (1 << 20):
            return None
        else:
            fh.seek(pos)
            if fh.read().strip():
                return None
    out = _csv_rows(texts)
    if out is None or any(len(fields) < need for fields in out):
        return None
    return out


def _identity_rows(
    export: text.Export, layout: _Layout, id_texts: list[str], gaps: np.ndarray
) -> list[list[str]] | None:
    """The first row of each launch, parsed in full, in file order.

    `gaps[k]` = rows from launch k's first row to launch k+1's first row (from the pandas pass): the
    next first row is found by skipping that many lines (memchr speed), checked against its ID, and
    searched for by `\\n"<ID>",` when the check fails (blank lines, values spanning lines)."""
    need = max(layout.header.index(c) for c in layout.identity_columns) + 1
    out: list[list[str]] = []
    stream = export.reopen()
    try:
        stream.readline()  # the header
        buf = stream.read(text.BLOCK_BYTES)
        pos = 0
        at_line_start = True
        for k, id_text in enumerate(id_texts):
            prefix = b'"' + id_text.encode() + b'",'
            while not (at_line_start and buf.startswith(prefix, pos)):
                i = buf.find(b"\n" + prefix, pos)
                if i >= 0:
                    pos = i + 1
                    break
                chunk = stream.read(text.BLOCK_BYTES)
                if not chunk:
                    return None
                keep = buf.rfind(b"\n", pos)
                buf = (buf[keep:] if keep >= 0 else buf[pos:]) + chunk
                pos = 0
                at_line_start = False
            end = buf.find(b"\n", pos)
            while end < 0:
                chunk = stream.read(text.BLOCK_BYTES)
                buf, pos = buf[pos:] + chunk, 0
                end = buf.find(b"\n") if chunk else len(buf)
            fields = _csv_fields(buf[pos:end].rstrip(b"\r").decode("utf-8", errors="replace"))
            if fields is None or len(fields) < need:
                return None
            out.append(fields)
            if k + 1 == len(id_texts):
                break
            n = int(gaps[k])
            while n > 0:
                nl = buf.find(b"\n", pos)
                if nl < 0:
                    chunk = stream.read(text.BLOCK_BYTES)
                    if not chunk:
                        return None
                    buf, pos = buf[pos:] + chunk, 0
                    continue
                pos = nl + 1
                n -= 1
            at_line_start = True
    finally:
        stream.close()
    return out if len(out) == len(id_texts) else None


def _details_robust(export: text.Export, layout: _Layout, collected: _Collected) -> tuple[np.ndarray, pa.Table, _LongRows]:
    """Block by block through pyarrow, with row-level repairs (see _read_blocks)."""
    header = layout.header
    detail_cols = [c for c in _DETAILS_COLUMNS if c in header]
    include = layout.identity_columns + [c for c in detail_cols if c not in layout.identity_columns]
    id_parts: list[np.ndarray] = []
    ident_ids: list[np.ndarray] = []
    ident_tables: list[pa.Table] = []
    metric_parts: list[pa.Table] = []
    line_parts: list[np.ndarray] = []
    ident_cols = layout.identity_columns

    def reduce(table: pa.Table, lines: np.ndarray) -> None:
        ids = _ids(export, table.column("ID"), lines)
        u, first = _first_per_id(table.select(ident_cols), ids)
        ident_ids.append(u)
        ident_tables.append(first)  # take() copies: the block can go
        keep = pc.not_equal(table.column("Metric Name"), "")
        keep_np = np.asarray(keep.to_numpy(zero_copy_only=False), dtype=bool)
        metric_parts.append(table.select(detail_cols).filter(keep))
        id_parts.append(ids[keep_np])
        line_parts.append(lines[keep_np])

    done = _read_blocks(export, layout, include, reduce)
    collected.bad_rows += done.bad_rows
    collected.text_lines += done.text_lines
    if done.n_rows == 0:
        raise InputError(export.path, "header but no data rows", line=export.header_line + 1,
                         hint="ncu profiled no kernel; check its filters, then " + text.EXPORT_HINT)
    all_ident_ids = np.concatenate(ident_ids)
    ident_table = pa.concat_tables(ident_tables)
    uids, first = np.unique(all_ident_ids, return_index=True)
    ident_table = ident_table.take(pa.array(first))
    metrics = pa.concat_tables(metric_parts)

    def codes(col: str) -> tuple[np.ndarray, list[str]]:
        if col not in metrics.column_names:
            return np.zeros(metrics.num_rows, np.int64), [""]
        return _codes(metrics.column(col))

    rows = _LongRows(np.concatenate(id_parts), np.concatenate(line_parts), codes("Section Name"),
                     codes("Body Item Label"), codes("Metric Name"), codes("Metric Unit"),
                     metrics.column("Metric Value"))
    return uids, ident_table, rows


def _file_style(export: text.Export, cleaned: Any, where: Callable[[int], str],
                line_of: Callable[[int], int]) -> numbers.StyleDecision:
    """The file's one number style; conflicting evidence is an InputError naming both cells."""
    style = numbers.decide_style(cleaned)
    if style.conflict is not None:
        a, b = style.conflict
        raise InputError(
            export.path,
            f"numbers mix styles: {cleaned.strings[a].as_py()!r} ({where(a)}) is en_US/C but "
            f"{cleaned.strings[b].as_py()!r} ({where(b)}) is de_DE",
            line=line_of(b),
            hint="re-export with LC_ALL=C so every number has one format",
        )
    return style


def _codes(column: pa.ChunkedArray | pa.Array) -> tuple[np.ndarray, list[str]]:
    """Integer codes and the distinct strings of a text column (plain, or dictionary-typed as pyarrow's
    CSV reader builds it chunk by chunk: the chunks' dictionaries are unified first)."""
    if pa.types.is_dictionary(column.type):
        enc = (column.unify_dictionaries().combine_chunks() if isinstance(column, pa.ChunkedArray) else column)
    else:
        enc = pc.dictionary_encode(column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column)
        if isinstance(enc, pa.ChunkedArray):
            enc = enc.combine_chunks()
    return (
        np.asarray(enc.indices.to_numpy(zero_copy_only=False), dtype=np.int64),
        [str(v) for v in enc.dictionary.to_pylist()],
    )


def _parse_values(export: text.Export, rows: _LongRows) -> tuple[numbers.StyleDecision, numbers.Parsed]:
    """Every value cell as a number (or text), in the file's one number style."""
    row_lines = rows.lines
    cleaned = numbers.cells(rows.values)
    style = _file_style(export, cleaned, lambda i: f"line {int(row_lines[i])}", lambda i: int(row_lines[i]))
    return style, numbers.parse(cleaned, style.style)


def _pivot_details(
    export: text.Export,
    rows: _LongRows,
    kidx: np.ndarray,
    n_kernels: int,
    parsing: Future[tuple[numbers.StyleDecision, numbers.Parsed]] | None = None,
) -> tuple[dict[str, Any], dict[str, str], numbers.StyleDecision]:
    """Values scattered into a kernels x columns table. `parsing`: _parse_values(export, rows) under way
    (its errors come after the unit errors found here, as when it runs here)."""
    (sec, sec_names), (body, body_names) = rows.section, rows.body
    (met, met_names), (unit, unit_names) = rows.metric, rows.unit
    row_lines = rows.lines
    key = ((sec * len(body_names) + body) * len(met_names) + met) * len(unit_names) + unit
    # distinct keys numbered in order of first appearance (a hash table, not a sort)
    inverse, uniq = pd.factorize(key, sort=False)
    first = first_appearances(inverse)

    # per distinct (section, body, metric/label, unit): column name, factor, priority
    combo_col = np.empty(len(uniq), np.int64)
    combo_factor = np.empty(len(uniq), np.float64)
    combo_explicit = np.empty(len(uniq), bool)
    col_names: list[str] = []
    col_units: list[str] = []
    col_index: dict[tuple[str, str], int] = {}
    # columns in order of first appearance in the file, whatever the code order
    for i in np.argsort(first, kind="stable").tolist():
        k, u = divmod(int(uniq[i]), len(unit_names))
        k, m = divmod(k, len(met_names))
        s, b = divmod(k, len(body_names))
        section, body_label, label, unit_name = sec_names[s], body_names[b], met_names[m], unit_names[u]
        try:
            factor, base = scale(unit_name)
        except UnknownUnitError as exc:
            raise UnitError(export.path, f"unknown unit {exc.unit!r} of {label!r}", line=int(row_lines[first[i]]),
                            hint="nsroof knows ncu's units (byte…Tbyte, ns/nsecond…second, hz…Ghz, "
                                 "cycle/nsecond, inst, sector, %, …); re-export with --print-units base") from None
        name, explicit = column_name(section, body_label, label, base)
        j = col_index.get((name, base))
        if j is None:
            j = len(col_names)
            col_index[(name, base)] = j
            col_names.append(name)
            col_units.append(base)
        combo_col[i] = j
        combo_factor[i] = factor
        combo_explicit[i] = explicit
    col_names = disambiguate(col_names, col_units)

    style, parsed = parsing.result() if parsing is not None else _parse_values(export, rows)
    return (
        _scatter(parsed, inverse, combo_col, combo_factor, combo_explicit, kidx, n_kernels, col_names),
        dict(zip(col_names, col_units, strict=True)),
        style,
    )


def _scatter(
    parsed: numbers.Parsed,
    inverse: np.ndarray,
    combo_col: np.ndarray,
    combo_factor: np.ndarray,
    combo_explicit: np.ndarray,
    kidx: np.ndarray,
    n_kernels: int,
    col_names: list[str],
) -> dict[str, Any]:
    n_cols = len(col_names)
    col = combo_col[inverse]
    has_number = np.bincount(col[parsed.numeric], minlength=n_cols) > 0
    has_string = np.bincount(col[~parsed.numeric & ~parsed.missing], minlength=n_cols) > 0
    string_col = has_string & ~has_number

    out = np.full((n_kernels, n_cols), np.nan, dtype=np.float64)
    rows = np.flatnonzero(parsed.numeric)
    # label-mapped rows first, explicit metric-name rows last: numpy keeps the last write of a repeated index
    explicit = combo_explicit[inverse[rows]]
    rows = np.concatenate([rows[~explicit][::-1], rows[explicit][::-1]])
    out[kidx[rows], col[rows]] = parsed.values[rows] * combo_factor[inverse[rows]]

    result: dict[str, Any] = {}
    str_rows = np.flatnonzero(np.isin(col, np.flatnonzero(string_col)) & ~parsed.missing)
    str_values = parsed.strings.take(pa.array(str_rows)).to_pylist() if str_rows.size else []
    str_cols: dict[int, np.ndarray] = {}
    for j in np.flatnonzero(string_col).tolist():
        str_cols[j] = np.full(n_kernels, "", dtype=object)
    for r, v in zip(str_rows[::-1].tolist(), str_values[::-1], strict=True):  # few rows: string metrics only
        str_cols[int(col[r])][kidx[r]] = v
    for j, name in enumerate(col_names):
        result[name] = str_cols[j] if string_col[j] else out[:, j]
    return result


# ---------------------------------------------------------------------------------------------
# raw page
# ---------------------------------------------------------------------------------------------


def _read_raw(export: text.Export, layout: _Layout) -> tuple[pd.DataFrame, FileFacts]:
    header = layout.header
    tables: list[pa.Table] = []
    line_parts: list[np.ndarray] = []

    def reduce(table: pa.Table, lines: np.ndarray) -> None:
        tables.append(table)  # one row per launch: the raw page is small
        line_parts.append(lines)

    collected = _read_blocks(export, layout, list(header), reduce)
    table = pa.concat_tables(tables) if tables else None
    if table is None or table.num_rows == 0:
        raise InputError(export.path, "header but no data rows", line=export.header_line + 1,
                         hint="ncu profiled no kernel; check its filters, then " + text.EXPORT_HINT)
    lines = np.concatenate(line_parts)
    identity_cols = layout.identity_columns
    metric_cols = [c for c in header if c not in identity_cols and c not in ("Kernel Time",)]
    id_col = table.column("ID")
    units_row: dict[str, str] = {}
    if id_col[0].as_py() == "":
        first = table.slice(0, 1).to_pylist()[0]
        units_row = {c: first[c] for c in metric_cols}
        table = table.slice(1)
        lines = lines[1:]
    if table.num_rows == 0:
        raise InputError(export.path, "header and units row but no data rows", line=export.header_line + 2,
                         hint="ncu profiled no kernel; check its filters, then " + text.EXPORT_HINT)
    ids = _ids(export, table.column("ID"), lines)
    if len(np.unique(ids)) != len(ids):
        # a raw page has one row per launch; repeated IDs mean separate processes or concatenated exports
        dup = int(ids[np.flatnonzero(np.diff(np.sort(ids)) == 0)[0]])
        raise InputError(export.path, f"launch ID {dup} appears on two rows of a raw-page export",
                         line=int(lines[int(np.flatnonzero(ids == dup)[1])]),
                         hint="export one report per file")
    warnings: list[str] = []
    hints: list[str] = []
    identity = _identity_frame(export, layout, ids, table.select(identity_cols))
    order = np.argsort(ids, kind="stable")

    units: dict[str, str] = {}
    factors: list[float] = []
    for c in metric_cols:
        unit_name = units_row.get(c, "")
        try:
            factor, base = scale(unit_name)
        except UnknownUnitError as exc:
            raise UnitError(export.path, f"unknown unit {exc.unit!r} of {c!r} in the units row",
                            line=export.header_line + 1,
                            hint="re-export with --print-units base") from None
        units[c] = base
        factors.append(factor)

    n = table.num_rows
    columns: dict[str, Any] = {}
    style = numbers.StyleDecision("C", "no numbers")
    if metric_cols:
        cells = pa.concat_arrays([numbers._as_strings(table.column(c)) for c in metric_cols])
        cleaned = numbers.cells(cells)
        style = _file_style(export, cleaned, lambda i: metric_cols[i // n], lambda i: int(lines[i % n]))
        parsed = numbers.parse(cleaned, style.style)
        values = parsed.values.reshape(len(metric_cols), n)
        numeric = parsed.numeric.reshape(len(metric_cols), n)
        missing = parsed.missing.reshape(len(metric_cols), n)
        for j, c in enumerate(metric_cols):
            if numeric[j].any() or missing[j].all():
                columns[c] = (values[j] * factors[j])[order]
            else:
                strs = np.asarray(cleaned.strings.slice(j * n, n).to_pylist(), dtype=object)
                strs[missing[j]] = ""
                columns[c] = strs[order]
    frame = assemble(identity, columns)
    fill_launch_identity(frame)
    return frame, _finish(export, layout, frame, {c: units[c] for c in columns}, style, collected, warnings, hints,
                          FORMAT_RAW)


# ---------------------------------------------------------------------------------------------
# shared
# ---------------------------------------------------------------------------------------------


def _finish(
    export: text.Export,
    layout: _Layout,
    frame: pd.DataFrame,
    units: dict[str, str],
    style: numbers.StyleDecision,
    collected: _Collected,
    warnings: list[str],
    hints: list[str],
    fmt: str,
) -> FileFacts:
    for msg in export.preamble.messages("==ERROR==")[:3] + export.preamble.messages("==WARNING==")[:3]:
        warnings.append(f"ncu said before the results: {msg}")
    if collected.bad_rows:
        line, _ = collected.bad_rows[0]
        warnings.append(
            f"{len(collected.bad_rows)} row(s) had an unescaped quote in an NVTX range name (first at line {line}); "
            "recovered them — keep '\"' out of NVTX range names"
        )
    if collected.text_lines:
        line, first = collected.text_lines[0]
        warnings.append(f"skipped {len(collected.text_lines)} non-CSV line(s) among the rows "
                        f"(first at line {line}: {first[:80]!r})")
    if style.evidence.startswith("ambiguous"):
        warnings.append(f"number style {style.style}: {style.evidence}")
    _roofline_hints(layout, frame, hints)
    return FileFacts(format=fmt, source=export.path.name, layout=layout.name, metric_units=units,
                     number_style=style.style, number_style_evidence=style.evidence, warnings=warnings,
                     hints=hints)


def _roofline_hints(layout: _Layout, frame: pd.DataFrame, hints: list[str]) -> None:
    cols = [str(c) for c in frame.columns]
    has_bytes = any(_BYTES_PATTERN.match(c) for c in cols)
    has_flops = any(_FLOPS_PATTERN.match(c) for c in cols)
    if has_bytes and has_flops:
        return
    lacking = " and ".join(w for w, ok in (("byte", has_bytes), ("FLOP", has_flops)) if not ok)
    if layout.page == "details":
        hints.append(
            f"this details-page export holds no {lacking} counters; the raw page of the same report lists "
            f"every metric ncu collected: `{RAW_EXPORT_COMMAND}` (if it lacks them too, profile with "
            "`ncu --set roofline` or `--metrics` with the roofline counters)"
        )
    else:
        hints.append(
            f"this export holds no {lacking} counters; profile with `ncu --set roofline` "
            "(or `--metrics` with the roofline counters), then "
            f"`{RAW_EXPORT_COMMAND}`"
        )
