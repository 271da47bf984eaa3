"""Numbers in ncu CSV cells, vectorised over whole columns (pyarrow.compute, RE2 regexes).

ncu formats numbers with the locale of the profiling host (../shared/docs/ncu-formats.md §1.3):

    C        2249873280   1443405676.69
    en_US    2,249,873,280   1,443,405,676.69   (--print-fp: 5,318,969,728.00)
    de_DE    2.249.873.280   1.443.405.676,69   65,77

The style is decided ONCE per file from the evidence in all its numeric cells (`decide_style`), never
cell by cell: `7,488` alone is ambiguous (en_US grouping or de_DE decimal), but a file that also
holds `1,009,150,443.18` is en_US. Then every cell is parsed with that one style (`parse`).

Cell values that are not numbers: `""`, `n/a`, `no data`, `nan` are missing (NaN); anything else
(`CachePreferNone`, `(128, 1, 1)`, GPU names) is a string value. Instance values
`agg (a; b; c)` (--print-metric-instances values) keep the aggregate `agg`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

STYLES = ("C", "en_US", "de_DE")
MISSING_TOKENS = ["", "n/a", "no data", "nan", "-nan", "na", "none", "null"]

# Anything built only from digits and separators (plus sign, exponent): a candidate number.
_NUMBERISH = r"^[-+]?(\d[\d,.]*|[.,]\d+)([eE][-+]?\d+)?$"
_INF = r"^[-+]?(inf|infinity)$"
_AGGREGATE = r"^(\S+)\s+\(.*\)$"

# Evidence patterns (on candidate numbers without sign/exponent noise; anchored):
_EN_STRONG = [
    r"^[-+]?\d{1,3}(,\d{3})+\.\d*$",  # 1,234.5   grouping ',' and decimal '.'
    r"^[-+]?\d{1,3}(,\d{3}){2,}$",  # 1,234,567 two or more ',' groups
    r"^[-+]?\d*\.(\d{1,2}|\d{4,})([eE][-+]?\d+)?$",  # 0.5 / 1443405676.69: '.' not followed by exactly 3 digits
]
_DE_STRONG = [
    r"^[-+]?\d{1,3}(\.\d{3})+,\d*$",  # 1.234,5
    r"^[-+]?\d{1,3}(\.\d{3}){2,}$",  # 1.234.567
    r"^[-+]?\d*,(\d{1,2}|\d{4,})$",  # 65,77 / 0,5: ',' not followed by exactly 3 digits
]
_EN_WEAK = r"^[-+]?\d{1,3},\d{3}$"  # 7,488  (en_US grouping or de_DE decimal)
_DE_WEAK = r"^[-+]?\d{1,3}\.\d{3}$"  # 2.508  (de_DE grouping or C decimal)
_ANY_COMMA = r","


@dataclass(frozen=True)
class StyleDecision:
    style: str  # "C", "en_US" or "de_DE"
    evidence: str  # one line: which cells decided it
    conflict: tuple[int, int] | None = None  # (index of an en/C cell, index of a de cell) when they disagree


def _as_strings(values: pa.Array | pa.ChunkedArray) -> pa.Array:
    if isinstance(values, pa.ChunkedArray):
        values = values.combine_chunks() if values.num_chunks != 1 else values.chunk(0)
    if not pa.types.is_string(values.type) and not pa.types.is_large_string(values.type):
        values = pc.cast(values, pa.string())
    return values


def clean(values: pa.Array | pa.ChunkedArray) -> pa.Array:
    """Trim whitespace and keep the aggregate of `agg (a; b; c)` instance values."""
    s = pc.utf8_trim_whitespace(_as_strings(values))
    return pc.replace_substring_regex(s, _AGGREGATE, r"\1")


def _first_true(mask: pa.Array) -> int | None:
    arr = np.asarray(mask.fill_null(False).to_numpy(zero_copy_only=False), dtype=bool)
    idx = np.flatnonzero(arr)
    return int(idx[0]) if idx.size else None


def decide_style(cleaned: pa.Array) -> StyleDecision:
    """Decide the file's number style from all its (cleaned) cells."""
    cand = pc.match_substring_regex(cleaned, _NUMBERISH)
    numbers = pc.if_else(cand, cleaned, pa.scalar(None, pa.string()))

    def first(patterns: list[str] | str) -> int | None:
        pats = [patterns] if isinstance(patterns, str) else patterns
        best: int | None = None
        for p in pats:
            i = _first_true(pc.match_substring_regex(numbers, p))
            if i is not None and (best is None or i < best):
                best = i
        return best

    en = first(_EN_STRONG)
    de = first(_DE_STRONG)
    if en is not None and de is not None:
        return StyleDecision("en_US", "", conflict=(en, de))
    comma = first(_ANY_COMMA)
    if en is not None:
        style = "en_US" if comma is not None else "C"
        return StyleDecision(style, f"cell {en} ({numbers[en].as_py()!r})")
    if de is not None:
        return StyleDecision("de_DE", f"cell {de} ({numbers[de].as_py()!r})")
    en_weak = first(_EN_WEAK)
    de_weak = first(_DE_WEAK)
    if en_weak is not None and de_weak is None:
        # `7,488`: ncu prints 2 decimals (or none), never 3, so a 3-digit group is grouping
        return StyleDecision("en_US", f"cell {en_weak} ({numbers[en_weak].as_py()!r}): ',' before 3 digits")
    if de_weak is not None and en_weak is None:
        return StyleDecision("de_DE", f"cell {de_weak} ({numbers[de_weak].as_py()!r}): '.' before 3 digits")
    if en_weak is not None and de_weak is not None:
        return StyleDecision(
            "en_US",
            f"ambiguous: cells {en_weak} ({numbers[en_weak].as_py()!r}) and {de_weak} "
            f"({numbers[de_weak].as_py()!r}) fit both en_US and de_DE; read as en_US",
        )
    return StyleDecision("C", "no separators in any number")


@dataclass
class Parsed:
    values: np.ndarray  # float64, NaN where not a number
    numeric: np.ndarray  # bool: the cell is a number
    missing: np.ndarray  # bool: the cell is empty / n/a / no data / nan
    strings: pa.Array  # the cleaned cells (for string-valued metrics)


def parse(cleaned: pa.Array, style: str) -> Parsed:
    """Parse cleaned cells with one style. Vectorised; no per-cell Python."""
    if style not in STYLES:
        raise ValueError(f"unknown number style {style!r}")
    lower = pc.utf8_lower(cleaned)
    missing = pc.fill_null(pc.is_in(lower, value_set=pa.array(MISSING_TOKENS)), True)
    if style == "en_US":
        digits = pc.replace_substring(cleaned, ",", "")
        ok = pc.match_substring_regex(cleaned, r"^[-+]?(\d{1,3}(,\d{3})*|\d+)(\.\d*)?([eE][-+]?\d+)?$|^[-+]?\.\d+$")
    elif style == "de_DE":
        digits = pc.replace_substring(pc.replace_substring(cleaned, ".", ""), ",", ".")
        ok = pc.match_substring_regex(cleaned, r"^[-+]?(\d{1,3}(\.\d{3})*|\d+)(,\d*)?([eE][-+]?\d+)?$|^[-+]?,\d+$")
    else:
        digits = cleaned
        ok = pc.match_substring_regex(cleaned, r"^[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?$")
    inf = pc.match_substring_regex(lower, _INF)
    ok = pc.fill_null(pc.or_(ok, inf), False)
    numeric_text = pc.if_else(ok, pc.if_else(inf, lower, digits), pa.scalar(None, pa.string()))
    floats = pc.cast(numeric_text, pa.float64())
    values = np.array(floats.to_numpy(zero_copy_only=False), dtype=np.float64, copy=True)
    numeric = np.asarray(ok.to_numpy(zero_copy_only=False), dtype=bool)
    values[~numeric] = np.nan
    return Parsed(values, numeric, np.asarray(missing.to_numpy(zero_copy_only=False), dtype=bool), cleaned)


def parse_text(cells: list[str], style: str | None = None) -> tuple[np.ndarray, str]:
    """Convenience for small inputs and tests: parse Python strings, deciding the style if not given."""
    arr = clean(pa.array(cells, type=pa.string()))
    chosen = style or decide_style(arr).style
    return parse(arr, chosen).values, chosen
