"""Value cells -> numbers in SI base units: the file's one number style (nsroof.importers.ncu.locale_numbers),
units converted per distinct (metric, unit) pair (nsroof.units), values scattered into a
kernels x metrics array. No per-cell Python."""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import Future
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa

from nsroof.counters import dimensions
from nsroof.errors import InputError, UnitError
from nsroof.frames.distinct import first_appearances
from nsroof.importers.ncu import csv_bytes as text
from nsroof.importers.ncu import locale_numbers as numbers
from nsroof.importers.ncu.csv_export.layout import LongRows
from nsroof.importers.ncu.section_labels import column_name, disambiguate, wrong_label_unit
from nsroof.importers.ncu.section_labels import is_read as label_is_read
from nsroof.units import UnknownUnitError, scale

_SCRATCH = "\0dropped"
DIMENSION_HINT = ("the export is damaged or edited; re-export it from the report "
                  "(ncu -i REPORT.ncu-rep --csv ...)")


SCATTER_ROWS = 1 << 16
ROUNDING_LIMIT = 0.01  # warn when the printed precision can move a figure a formula reads by more than this


def rounding_warning(parsed: numbers.Parsed, scaled: np.ndarray, name_of: Callable[[int], str],
                     line_of: Callable[[int], int]) -> str | None:
    """One warning when a value printed in an auto-scaled unit (`scaled`: per cell, a unit with a prefix,
    of a metric a roofline number reads) has so few digits that rounding can move it by more than 1%:
    half a unit of its last printed digit over the value (6 usecond printed for 6.496: 0.5 / 6 = 8.3%)."""
    if parsed.decimals is None:
        return None
    rows = np.flatnonzero(scaled & parsed.numeric & (parsed.decimals >= 0) & (parsed.values != 0))
    if not rows.size:
        return None
    with np.errstate(divide="ignore", invalid="ignore"):
        rel = 0.5 * np.power(10.0, -parsed.decimals[rows].astype(float)) / np.abs(parsed.values[rows])
    over = rel > ROUNDING_LIMIT
    if not over.any():
        return None
    worst = int(rows[int(np.nanargmax(rel))])
    return (f"{int(over.sum())} value(s) in auto-scaled units are printed with so few digits that rounding "
            f"can move them by more than 1% (up to {float(np.nanmax(rel)):.1%}: {name_of(worst)} at line "
            f"{line_of(worst)}); export with --print-units base for full precision")


def file_style(export: text.Export, cleaned: Any, where: Callable[[int], str],
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


def parse_values(export: text.Export, rows: LongRows) -> tuple[numbers.StyleDecision, numbers.Parsed]:
    """Every value cell as a number (or text), in the file's one number style."""
    row_lines = rows.lines
    cleaned = numbers.cells(rows.values)
    style = file_style(export, cleaned, lambda i: f"line {int(row_lines[i])}", lambda i: int(row_lines[i]))
    return style, numbers.parse(cleaned, style.style)


def pivot_details(
    export: text.Export,
    rows: LongRows,
    kidx: np.ndarray,
    n_kernels: int,
    parsing: Future[tuple[numbers.StyleDecision, numbers.Parsed]] | None = None,
    ignored: list[tuple[str, str]] | None = None,
    notes: list[str] | None = None,
) -> tuple[dict[str, Any], dict[str, str], numbers.StyleDecision]:
    """Values scattered into a kernels x columns table. `parsing`: parse_values(export, rows) under way
    (its errors come after the unit errors found here, as when it runs here). A metric no roofline number
    reads with a unit nsroof cannot use is left out and appended to `ignored` (metric, printed unit)."""
    (sec, sec_names), (body, body_names) = rows.section, rows.body
    (met, met_names), (unit, unit_names) = rows.metric, rows.unit
    row_lines = rows.lines
    key = ((sec.astype(np.int64) * len(body_names) + body) * len(met_names) + met) * len(unit_names) + unit
    inverse, uniq = pd.factorize(key, sort=False)  # int64 keys, numbered by first appearance (no sort)
    del key  # one int64 per row: the peak of a large export's import is here, with every row's arrays alive
    first = first_appearances(inverse)

    combo_col = np.empty(len(uniq), np.int64)  # per distinct key: column, factor, priority
    combo_factor = np.empty(len(uniq), np.float64)
    combo_explicit = np.empty(len(uniq), bool)
    col_names: list[str] = []
    col_units: list[str] = []
    col_index: dict[tuple[str, str], int] = {}
    dropped: list[tuple[int, str, str]] = []  # (distinct key, column name, printed unit)
    deferred: list[tuple[int, str]] = []  # (distinct key, why): a read metric in a wrong unit
    for i in np.argsort(first, kind="stable").tolist():  # columns in the file's order, not code order
        k, u = divmod(int(uniq[i]), len(unit_names))
        k, m = divmod(k, len(met_names))
        s, b = divmod(k, len(body_names))
        section, body_label, label, unit_name = sec_names[s], body_names[b], met_names[m], unit_names[u]
        try:
            factor, base = scale(unit_name)
        except UnknownUnitError as exc:
            name = column_name(section, body_label, label, "")[0]
            if label_is_read(section, body_label, label, name):
                raise UnitError(
                    export.path, f"unknown unit {exc.unit!r} of {label!r}", line=int(row_lines[first[i]]),
                    hint="nsroof knows ncu's units (byte…Tbyte, ns/nsecond…second, hz…Ghz, cycle/nsecond, "
                         "inst, sector, %, …); re-export with --print-units base") from None
            dropped.append((i, name, unit_name))
            continue
        name, explicit = column_name(section, body_label, label, base)
        wrong = dimensions.check(name, base) or (None if explicit else
                                                 wrong_label_unit(section, body_label, label, base))
        if wrong is not None:
            if label_is_read(section, body_label, label, name):
                # refused when a number is printed in it; a failed launch prints `n/a` with no unit
                deferred.append((i, f"unit {unit_name!r} of the wrong dimension: {wrong}"))
            else:
                dropped.append((i, name, unit_name))
            continue
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
    for i in [d[0] for d in dropped] + [d[0] for d in deferred]:  # a scratch column, popped below
        combo_col[i], combo_factor[i], combo_explicit[i] = len(col_names), 1.0, False

    style, parsed = parsing.result() if parsing is not None else parse_values(export, rows)
    _check_after_parsing(export, parsed, inverse, row_lines, deferred, dropped, ignored)
    read = np.array([c < len(col_names) and dimensions.is_read(col_names[c]) for c in combo_col.tolist()],
                    bool)
    note = rounding_warning(parsed, (read & (combo_factor != 1.0))[inverse],
                            lambda r: col_names[combo_col[inverse[r]]], lambda r: int(row_lines[r]))
    if note is not None and notes is not None:
        notes.append(note)
    scratch = [_SCRATCH] if dropped or deferred else []
    columns = _scatter(parsed, inverse, combo_col, combo_factor, combo_explicit, kidx, n_kernels,
                       col_names + scratch)
    columns.pop(_SCRATCH, None)
    return columns, dict(zip(col_names, col_units, strict=True)), style


def _check_after_parsing(export: text.Export, parsed: numbers.Parsed, inverse: np.ndarray,
                         row_lines: np.ndarray, deferred: list[tuple[int, str]],
                         dropped: list[tuple[int, str, str]], ignored: list[tuple[str, str]] | None) -> None:
    """A number printed in a unit of another dimension, for a counter a roofline number reads, refuses the
    file (a failed launch's `n/a` is no number); a dropped metric that lost a value is noted in `ignored`."""
    for i, why in deferred:
        printed = np.flatnonzero((inverse == i) & parsed.numeric)
        if printed.size:
            raise UnitError(export.path, why, line=int(row_lines[printed[0]]), hint=DIMENSION_HINT)
    for i, name, unit_name in dropped:
        if ignored is not None and ((inverse == i) & ~parsed.missing).any():  # a value was there to lose
            ignored.append((name, unit_name))


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
    explicit = combo_explicit[inverse[rows]]
    # label-mapped rows first, explicit metric-name rows last, each in reverse file order: numpy keeps
    # the last write of a repeated index, so the first row in the file wins. In slices of SCATTER_ROWS,
    # in that order: one slice's gathered indices, values and factors are alive at a time
    for chosen in (~explicit, explicit):
        part = rows[chosen][::-1]
        for lo in range(0, len(part), SCATTER_ROWS):
            at = part[lo : lo + SCATTER_ROWS]
            out[kidx[at], col[at]] = parsed.values[at] * combo_factor[inverse[at]]
    del rows, explicit

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
