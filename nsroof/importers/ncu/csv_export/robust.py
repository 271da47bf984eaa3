"""The robust reader: the export streamed in row-aligned blocks (gzip, BOM, CRLF and text before the
header handled in nsroof.importers.ncu.csv_bytes) through pyarrow at the metric-row width; rows it rejects
(text lines, rows broken by an unescaped quote in an NVTX range name) get a row-level repair, or an
InputError naming their line. It reads every details page the scan declines, and every raw page."""

from __future__ import annotations

import csv
import io
import re
from collections.abc import Callable
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv

from nsroof.errors import InputError
from nsroof.importers.ncu import csv_bytes as text
from nsroof.importers.ncu.csv_export.layout import (
    DETAILS_COLUMNS,
    Collected,
    Layout,
    LongRows,
    dict_codes,
    first_per_id,
    launch_ids,
)


def _may_hold_blank_lines(block: memoryview, newlines: np.ndarray) -> bool:
    """Whether a line of the block starts with a space or tab, from the newline positions the line
    numbering needs anyway (a multiline regex for whitespace-only lines took 1.7 s over the 254 MB
    benchmark export, substring searches 0.45 s). Lines of only CR are fine: pyarrow skips them."""
    buf = np.frombuffer(block, dtype=np.uint8)
    if not len(buf):
        return False
    starts = buf[np.concatenate(([0], newlines[newlines + 1 < len(buf)] + 1))]
    return bool(((starts == 32) | (starts == 9)).any())


def _empty_blank_lines(block: memoryview) -> memoryview:
    """The block with every whitespace-only line emptied (its newline kept), in numpy: a regex
    substitution took 0.5 s for a million such lines."""
    buf = np.frombuffer(block, dtype=np.uint8)
    newline = buf == 10
    nl = np.flatnonzero(newline)
    starts = np.concatenate(([0], nl + 1))
    ends = np.concatenate((nl, [len(buf)]))
    solid = (buf != 32) & (buf != 9) & (buf != 13) & (buf != 11) & (buf != 12)  # newlines count as solid
    solid_before = np.concatenate(([0], np.cumsum(solid, dtype=np.int32)))
    blank = solid_before[ends] - solid_before[starts] == 0
    seg = ends - starts + 1  # each line with its newline
    seg[-1] -= 1  # the last line has none
    drop = np.repeat(blank, seg) & ~newline
    return memoryview(buf[~drop].tobytes())


def read_blocks(
    export: text.Export, layout: Layout, include: list[str], reduce: Callable[[pa.Table, np.ndarray], None]
) -> Collected:
    """Parse every block and hand it (only `include` columns, with line numbers) to `reduce` at once,
    so no more than one block's rows is alive at a time.

    Details pages: metric rows end after `Metric Value` with a trailing comma, narrower than the header;
    only rule rows are full width. pyarrow parses the block with the narrow width, so the (many) metric
    rows go through the fast parser and the (few) rule rows come back through the invalid-row handler."""
    collected = Collected()
    header = layout.header
    ncols = len(header)
    width: int | None = None
    for first_line, block in export.blocks():
        newlines = np.flatnonzero(np.frombuffer(block, dtype=np.uint8) == 10)
        if _may_hold_blank_lines(block, newlines):
            # whitespace-only lines would each take pyarrow's invalid-row path (~30 µs a line: a million
            # took 35 s); emptied, pyarrow skips them as blank lines. The line count stays the same.
            block = _empty_blank_lines(block)
            newlines = np.flatnonzero(np.frombuffer(block, dtype=np.uint8) == 10)
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
        ok_lines, other_lines = _line_numbers(block, newlines, first_line, narrow=width < ncols)
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


def _line_numbers(block: memoryview, nl: np.ndarray, first_line: int, *,
                  narrow: bool) -> tuple[np.ndarray, np.ndarray]:
    """Line numbers of the rows pyarrow keeps (narrow: rows ending in a trailing comma) and of the others.
    nl: the block's newline positions."""
    buf = np.frombuffer(block, dtype=np.uint8)
    if not narrow:
        return first_line + np.arange(len(nl), dtype=np.int64), np.zeros(0, np.int64)
    prev = buf[np.maximum(nl - 1, 0)].copy()
    cr = prev == 13
    prev[cr] = buf[np.maximum(nl[cr] - 2, 0)]
    ragged = prev == 44
    return first_line + np.flatnonzero(ragged), first_line + np.flatnonzero(~ragged)


def _repair(
    export: text.Export,
    layout: Layout,
    include: list[str],
    width: int,
    rejected: list[str],
    block: memoryview,
    first_line: int,
    other_lines: np.ndarray,
    collected: Collected,
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
        fields = csv_fields(raw)
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
        cause = (f"row has {len(fields)} fields, the header has {ncols}" if fields is not None
                 else _csv_error(raw))
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


def _csv_error(raw: str) -> str:
    """Why a row is not one CSV row (error paths only)."""
    try:
        rows = list(csv.reader(io.StringIO(raw), strict=True))
    except csv.Error as exc:
        if "field limit" in str(exc):
            return f"a cell longer than {text.MAX_FIELD_BYTES:,} bytes (no real name is that long)"
        return f"unreadable CSV row ({exc})"
    return "row ends inside a quoted field" if len(rows) <= 1 else "a line break outside a quoted cell"


def csv_fields(raw: str) -> list[str] | None:
    try:
        reader = csv.reader(io.StringIO(raw), strict=True)
        rows = list(reader)
    except csv.Error:
        return None
    if len(rows) != 1:
        return None
    return rows[0]


def _only_trailing_missing(layout: Layout, n: int) -> bool:
    """A short row is fine when what it lacks is only rule columns (details) — never metric values."""
    return layout.page == "details" and n > layout.header.index("Metric Value")


def _recover_nvtx_row(layout: Layout, raw: str) -> list[str] | None:
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
    right = re.search(r'((?:,"(?:[^"]|"")*"){' + str(n_after) + "})$", line) if n_after else None
    if n_after and right is None:
        return None
    tail_text = right.group(1) if right is not None else ""
    try:  # a CR or an oversized cell among them: not a row this repair can vouch for
        head_fields = next(csv.reader([left.group(1)[:-1]]))
        tail_fields = next(csv.reader([tail_text[1:]])) if tail_text else []
    except csv.Error:
        return None
    if len(tail_fields) != n_after:
        return None
    middle = line[len(left.group(1)) : len(line) - len(tail_text)]
    if not (middle.startswith('"') and middle.endswith('"')):
        return None
    cell = middle[1:-1].replace('""', '"')
    return head_fields + [cell] + tail_fields


def details_robust(export: text.Export, layout: Layout,
                   collected: Collected) -> tuple[np.ndarray, pa.Table, LongRows]:
    """Block by block through pyarrow, with row-level repairs (see read_blocks)."""
    header = layout.header
    detail_cols = [c for c in DETAILS_COLUMNS if c in header]
    include = layout.identity_columns + [c for c in detail_cols if c not in layout.identity_columns]
    id_parts: list[np.ndarray] = []
    ident_ids: list[np.ndarray] = []
    ident_tables: list[pa.Table] = []
    metric_parts: list[pa.Table] = []
    line_parts: list[np.ndarray] = []
    ident_cols = layout.identity_columns

    def reduce(table: pa.Table, lines: np.ndarray) -> None:
        ids = launch_ids(export, table.column("ID"), lines)
        u, first = first_per_id(table.select(ident_cols), ids)
        ident_ids.append(u)
        ident_tables.append(first)  # take() copies: the block can go
        keep = pc.not_equal(table.column("Metric Name"), "")
        keep_np = np.asarray(keep.to_numpy(zero_copy_only=False), dtype=bool)
        metric_parts.append(table.select(detail_cols).filter(keep))
        id_parts.append(ids[keep_np])
        line_parts.append(lines[keep_np])

    done = read_blocks(export, layout, include, reduce)
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
            return np.zeros(metrics.num_rows, np.int32), [""]
        return dict_codes(metrics.column(col))

    rows = LongRows(np.concatenate(id_parts), np.concatenate(line_parts), codes("Section Name"),
                     codes("Body Item Label"), codes("Metric Name"), codes("Metric Unit"),
                     metrics.column("Metric Value"))
    return uids, ident_table, rows
