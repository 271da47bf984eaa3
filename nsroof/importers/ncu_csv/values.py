"""Value cells -> numbers in SI base units: the file's one number style (nsroof.importers._ncunumbers),
units converted per distinct (metric, unit) pair (nsroof.units), values scattered into a
kernels x metrics array. No per-cell Python."""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import Future
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa

from nsroof._distinct import first_appearances
from nsroof.errors import InputError, UnitError
from nsroof.importers import _ncunumbers as numbers
from nsroof.importers import _ncutext as text
from nsroof.importers._nculabels import column_name, disambiguate, wrong_label_unit
from nsroof.importers._nculabels import is_read as label_is_read
from nsroof.importers.ncu_csv.layout import LongRows
from nsroof.models import dimensions
from nsroof.units import UnknownUnitError, scale

_SCRATCH = "\0dropped"
DIMENSION_HINT = "the export is damaged or edited; re-export it from the report (ncu -i REPORT.ncu-rep --csv ...)"


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
) -> tuple[dict[str, Any], dict[str, str], numbers.StyleDecision]:
    """Values scattered into a kernels x columns table. `parsing`: parse_values(export, rows) under way
    (its errors come after the unit errors found here, as when it runs here). A metric no roofline number
    reads with a unit nsroof cannot use is left out and appended to `ignored` (metric, printed unit)."""
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
    dropped: list[tuple[int, str, str]] = []  # (distinct key, column name, printed unit)
    # columns in order of first appearance in the file, whatever the code order
    for i in np.argsort(first, kind="stable").tolist():
        k, u = divmod(int(uniq[i]), len(unit_names))
        k, m = divmod(k, len(met_names))
        s, b = divmod(k, len(body_names))
        section, body_label, label, unit_name = sec_names[s], body_names[b], met_names[m], unit_names[u]
        try:
            factor, base = scale(unit_name)
        except UnknownUnitError as exc:
            name = column_name(section, body_label, label, "")[0]
            if label_is_read(section, body_label, label, name):
                raise UnitError(export.path, f"unknown unit {exc.unit!r} of {label!r}", line=int(row_lines[first[i]]),
                                hint="nsroof knows ncu's units (byte…Tbyte, ns/nsecond…second, hz…Ghz, "
                                     "cycle/nsecond, inst, sector, %, …); re-export with --print-units base") from None
            dropped.append((i, name, unit_name))
            continue
        name, explicit = column_name(section, body_label, label, base)
        wrong = dimensions.check(name, base) or (None if explicit else
                                                 wrong_label_unit(section, body_label, label, base))
        if wrong is not None:
            if label_is_read(section, body_label, label, name):
                raise UnitError(export.path, f"unit {unit_name!r} of the wrong dimension: {wrong}",
                                line=int(row_lines[first[i]]), hint=DIMENSION_HINT)
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
    if dropped:
        # the dropped rows go to one scratch column, removed after the scatter
        for i, name, unit_name in dropped:
            combo_col[i], combo_factor[i], combo_explicit[i] = len(col_names), 1.0, False
            if ignored is not None:
                ignored.append((name, unit_name))

    style, parsed = parsing.result() if parsing is not None else parse_values(export, rows)
    scratch = [_SCRATCH] if dropped else []
    columns = _scatter(parsed, inverse, combo_col, combo_factor, combo_explicit, kidx, n_kernels, col_names + scratch)
    columns.pop(_SCRATCH, None)
    return columns, dict(zip(col_names, col_units, strict=True)), style


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
