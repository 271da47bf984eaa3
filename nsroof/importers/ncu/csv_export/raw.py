"""The raw page: one row per launch, a units row under the header, every metric a column."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from nsroof.counters import dimensions
from nsroof.errors import InputError, UnitError
from nsroof.importers.kernel_table import assemble, fill_launch_identity
from nsroof.importers.ncu import csv_bytes as text
from nsroof.importers.ncu import locale_numbers as numbers
from nsroof.importers.ncu.csv_export.layout import Collected, Layout, identity_frame, launch_ids
from nsroof.importers.ncu.csv_export.robust import read_blocks
from nsroof.importers.ncu.csv_export.values import DIMENSION_HINT, file_style, rounding_warning
from nsroof.units import UnknownUnitError, scale


def read_raw(
    export: text.Export, layout: Layout
) -> tuple[pd.DataFrame, dict[str, str], numbers.StyleDecision, Collected]:
    """The kernel table of a raw page, its columns' base units, the number style and what reading noticed."""
    header = layout.header
    tables: list[pa.Table] = []
    line_parts: list[np.ndarray] = []

    def reduce(table: pa.Table, lines: np.ndarray) -> None:
        tables.append(table)  # one row per launch: the raw page is small
        line_parts.append(lines)

    collected = read_blocks(export, layout, list(header), reduce)
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
    blank_ids = np.flatnonzero(np.asarray(pc.equal(table.column("ID"), "").to_numpy(zero_copy_only=False),
                                          bool))
    if blank_ids.size:
        # the raw page has one units row, right under the header: another row without a launch ID is a
        # units row repeated (concatenated exports) or a damaged row, never a launch
        raise InputError(export.path, "a second units row (a row without a launch ID) among the launches",
                         line=int(lines[blank_ids[0]]),
                         hint="export one report per file; " + text.EXPORT_HINT)
    ids = launch_ids(export, table.column("ID"), lines)
    if len(np.unique(ids)) != len(ids):
        # a raw page has one row per launch; repeated IDs mean separate processes or concatenated exports
        in_order = np.sort(ids)
        dup = int(in_order[np.flatnonzero(np.diff(in_order) == 0)[0]])
        raise InputError(export.path, f"launch ID {dup} appears on two rows of a raw-page export",
                         line=int(lines[int(np.flatnonzero(ids == dup)[1])]),
                         hint="export one report per file")
    identity = identity_frame(export, layout, ids, table.select(identity_cols))
    order = np.argsort(ids, kind="stable")

    metric_cols, units, factors = _usable_units(export, metric_cols, units_row, collected)

    n = table.num_rows
    columns: dict[str, Any] = {}
    style = numbers.StyleDecision("C", "no numbers")
    if metric_cols:
        cells = pa.concat_arrays([numbers._as_strings(table.column(c)) for c in metric_cols])
        cleaned = numbers.cells(cells)
        style = file_style(export, cleaned, lambda i: metric_cols[i // n], lambda i: int(lines[i % n]))
        parsed = numbers.parse(cleaned, style.style)
        scaled_col = np.array([f != 1.0 and dimensions.is_read(c)
                               for c, f in zip(metric_cols, factors, strict=True)], bool)
        note = rounding_warning(parsed, np.repeat(scaled_col, n), lambda i: metric_cols[i // n],
                                lambda i: int(lines[i % n]))
        if note is not None:
            collected.notes.append(note)
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
    return frame, {c: units[c] for c in columns}, style, collected


def _usable_units(export: text.Export, metric_cols: list[str], units_row: dict[str, str],
                  collected: Collected) -> tuple[list[str], dict[str, str], list[float]]:
    """The metric columns whose unit nsroof can use, their base units and factors. A unit unknown or of
    another dimension refuses the file on a counter a roofline number reads; any other such column is
    dropped and noted in collected.ignored."""
    units: dict[str, str] = {}
    factors: list[float] = []
    kept: list[str] = []
    for c in metric_cols:
        unit_name = units_row.get(c, "")
        try:
            factor, base = scale(unit_name)
            wrong = dimensions.check(c, base)
        except UnknownUnitError as exc:
            if dimensions.is_read(c):
                raise UnitError(export.path, f"unknown unit {exc.unit!r} of {c!r} in the units row",
                                line=export.header_line + 1,
                                hint="re-export with --print-units base") from None
            collected.ignored.append((c, unit_name))
            continue
        if wrong is not None:
            if dimensions.is_read(c):
                raise UnitError(export.path,
                                f"unit {unit_name!r} of the wrong dimension in the units row: {wrong}",
                                line=export.header_line + 1, hint=DIMENSION_HINT)
            collected.ignored.append((c, unit_name))
            continue
        kept.append(c)
        units[c] = base
        factors.append(factor)
    return kept, units, factors
