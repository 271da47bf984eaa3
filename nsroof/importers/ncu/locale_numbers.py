"""Numbers in ncu CSV cells, vectorised over whole columns.

ncu formats numbers with the locale of the profiling host (seen in public exports; --print-fp):

    C        2249873280   1443405676.69
    en_US    2,249,873,280   1,443,405,676.69   (--print-fp: 5,318,969,728.00)
    de_DE    2.249.873.280   1.443.405.676,69   65,77

The style is decided ONCE per file from the evidence in all its cells (`decide_style`), never cell by
cell: `7,488` alone is ambiguous (en_US grouping or de_DE decimal), but a file that also holds
`1,009,150,443.18` is en_US. Then every cell is parsed with that one style (`parse`).

How, without per-cell Python: every cell is reduced to its *shape* (each digit replaced by `d`:
`1,234.56` -> `d,ddd.dd`) in one vectorised pass; a file has few distinct shapes, so the style
evidence and each shape's class (number / missing / string) are worked out on the distinct shapes,
then mapped back to the cells by their dictionary codes. The numbers themselves are converted by one
literal replace and one Arrow cast.

Cells that are not numbers: `""`, `n/a`, `no data`, `nan` are missing (NaN); anything else
(`CachePreferNone`, `(128, 1, 1)`, GPU names) is a string value. Instance values
`agg (a; b; c)` (--print-metric-instances values) keep the aggregate `agg`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from nsroof.frames.distinct import first_appearances

STYLES = ("C", "en_US", "de_DE")
MISSING_TOKENS = frozenset(["", "n/a", "no data", "nan", "-nan", "na", "none", "null", "--"])

_AGGREGATE = r"^(\S+)\s+\(.*\)$"
_AGGREGATE_SHAPE = re.compile(r"^\S+\s+\(.*\)$")
_INF_SHAPE = re.compile(r"^[-+]?(inf|infinity)$", re.IGNORECASE)

# Patterns over shapes (every digit is `d`). A candidate number is built from digits and separators.
_NUMBERISH = re.compile(r"^[-+]?(d[d,.]*|[.,]d+)([eE][-+]?d+)?$")
_EN_STRONG = [
    re.compile(r"^[-+]?d{1,3}(,ddd)+\.d*$"),  # 1,234.5   grouping ',' and decimal '.'
    re.compile(r"^[-+]?d{1,3}(,ddd){2,}$"),  # 1,234,567 two or more ',' groups
    # 0.5, 1443405676.69: '.' then not exactly 3 digits
    re.compile(r"^[-+]?d*\.(d{1,2}|d{4,})([eE][-+]?d+)?$"),
]
_DE_STRONG = [
    re.compile(r"^[-+]?d{1,3}(\.ddd)+,d*$"),  # 1.234,5
    re.compile(r"^[-+]?d{1,3}(\.ddd){2,}$"),  # 1.234.567
    re.compile(r"^[-+]?d*,(d{1,2}|d{4,})$"),  # 65,77 / 0,5: ',' then not exactly 3 digits
]
_EN_WEAK = re.compile(r"^[-+]?d{1,3},ddd$")  # 7,488  (en_US grouping or de_DE decimal)
_DE_WEAK = re.compile(r"^[-+]?d{1,3}\.ddd$")  # 2.508  (de_DE grouping or C decimal)
_NUMBER = {
    "C": re.compile(r"^[-+]?(d+\.?d*|\.d+)([eE][-+]?d+)?$"),
    "en_US": re.compile(r"^[-+]?(d{1,3}(,ddd)+|d+)(\.d*)?([eE][-+]?d+)?$|^[-+]?\.d+$"),
    "de_DE": re.compile(r"^[-+]?(d{1,3}(\.ddd)+|d+)(,d*)?([eE][-+]?d+)?$|^[-+]?,d+$"),
}


@dataclass(frozen=True)
class StyleDecision:
    style: str  # "C", "en_US" or "de_DE"
    evidence: str  # one line: which cells decided it
    conflict: tuple[int, int] | None = None  # (index of an en_US/C cell, index of a de_DE cell)


@dataclass
class Cells:
    """Cleaned cells plus their shapes (dictionary-encoded)."""

    strings: pa.Array  # cleaned cell text
    codes: np.ndarray  # shape code per cell
    shapes: list[str]  # distinct shapes
    first: np.ndarray  # index of the first cell of each shape

    def example(self, shape_index: int) -> tuple[int, str]:
        i = int(self.first[shape_index])
        return i, str(self.strings[i].as_py())


@dataclass
class Parsed:
    values: np.ndarray  # float64, NaN where not a number
    numeric: np.ndarray  # bool: the cell is a number
    missing: np.ndarray  # bool: the cell is empty / n/a / no data / nan
    strings: pa.Array  # the cleaned cells (for string-valued metrics)
    decimals: np.ndarray | None = None  # int: digits printed after the decimal mark (-1: not a plain number)


def _as_strings(values: pa.Array | pa.ChunkedArray) -> pa.Array:
    if isinstance(values, pa.ChunkedArray):
        values = values.combine_chunks() if values.num_chunks != 1 else values.chunk(0)
    if not pa.types.is_string(values.type) and not pa.types.is_large_string(values.type):
        values = pc.cast(values, pa.string())
    return values.fill_null("") if values.null_count else values


_TO_SHAPE = np.arange(256, dtype=np.uint8)
_TO_SHAPE[ord("0") : ord("9") + 1] = ord("d")


def shapes_of(strings: pa.Array) -> pa.Array:
    """Each cell with every ASCII digit replaced by `d`: one table lookup over the data buffer
    (same offsets, so no per-cell work; UTF-8 multi-byte sequences never contain ASCII bytes)."""
    validity, offsets, data = strings.buffers()
    if data is None or data.size == 0:
        return strings
    mapped = _TO_SHAPE[np.frombuffer(data, dtype=np.uint8)]
    cls = pa.LargeStringArray if pa.types.is_large_string(strings.type) else pa.StringArray
    return cls.from_buffers(len(strings), offsets, pa.py_buffer(mapped.tobytes()), validity,
                            strings.null_count, strings.offset)


def _encode(strings: pa.Array) -> tuple[np.ndarray, list[str], np.ndarray]:
    enc = pc.dictionary_encode(shapes_of(strings))
    codes = np.asarray(enc.indices.to_numpy(zero_copy_only=False), dtype=np.int64)
    shapes = [str(s) for s in enc.dictionary.to_pylist()]
    # Arrow numbers the dictionary in order of first appearance
    first = first_appearances(codes)
    return codes, shapes, first


def cells(values: pa.Array | pa.ChunkedArray) -> Cells:
    """Shapes of all cells; instance values `agg (a; b)` reduced to `agg`, whitespace trimmed."""
    strings = _as_strings(values)
    codes, shapes, first = _encode(strings)
    if any(_AGGREGATE_SHAPE.match(s) for s in shapes):
        strings = pc.replace_substring_regex(strings, _AGGREGATE, r"\1")
        codes, shapes, first = _encode(strings)
    if any(s != s.strip() for s in shapes):
        strings = pc.utf8_trim_whitespace(strings)
        codes, shapes, first = _encode(strings)
    return Cells(strings, codes, shapes, first)


def decide_style(c: Cells) -> StyleDecision:
    """Decide the file's number style from the shapes of all its cells."""
    numberish = [i for i, s in enumerate(c.shapes) if _NUMBERISH.match(s)]

    def earliest(patterns: list[re.Pattern[str]] | re.Pattern[str]) -> int | None:
        pats = patterns if isinstance(patterns, list) else [patterns]
        hits = [i for i in numberish if any(p.match(c.shapes[i]) for p in pats)]
        return min(hits, key=lambda i: c.first[i]) if hits else None

    en, de = earliest(_EN_STRONG), earliest(_DE_STRONG)
    if en is not None and de is not None:
        return StyleDecision("en_US", "", conflict=(c.example(en)[0], c.example(de)[0]))
    commas = [i for i in numberish if "," in c.shapes[i]]
    if en is not None:
        i, v = c.example(en)
        if not commas:
            return StyleDecision("C", f"decimal '.' in cell {i} ({v!r}), no ',' in any number")
        j, w = c.example(min(commas, key=lambda k: c.first[k]))
        return StyleDecision("en_US", f"decimal '.' in cell {i} ({v!r}), grouping ',' in cell {j} ({w!r})")
    if de is not None:
        i, v = c.example(de)
        return StyleDecision("de_DE", f"decimal ',' or grouping '.' in cell {i} ({v!r})")
    en_weak, de_weak = earliest(_EN_WEAK), earliest(_DE_WEAK)
    if en_weak is not None and de_weak is None:
        # `7,488`: ncu prints 2 decimals (or none), never 3, so a 3-digit group is grouping
        i, v = c.example(en_weak)
        return StyleDecision("en_US", f"cell {i} ({v!r}): ',' before 3 digits")
    if de_weak is not None and en_weak is None:
        i, v = c.example(de_weak)
        return StyleDecision("de_DE", f"cell {i} ({v!r}): '.' before 3 digits")
    if en_weak is not None and de_weak is not None:
        (i, v), (j, w) = c.example(en_weak), c.example(de_weak)
        return StyleDecision("en_US", f"ambiguous: cells {i} ({v!r}) and {j} ({w!r}) fit both en_US and "
                                      "de_DE; read as en_US")
    return StyleDecision("C", "no separators in any number")


def parse(c: Cells, style: str) -> Parsed:
    """Parse all cells with one style. Vectorised: per-shape classes, one replace, one cast."""
    if style not in STYLES:
        raise ValueError(f"unknown number style {style!r}")
    number = _NUMBER[style]
    is_number = np.array([bool(number.match(s)) or bool(_INF_SHAPE.match(s)) for s in c.shapes], dtype=bool)
    is_missing = np.array([s.lower() in MISSING_TOKENS for s in c.shapes], dtype=bool)
    numeric = is_number[c.codes] if len(c.codes) else np.zeros(0, bool)
    missing = is_missing[c.codes] if len(c.codes) else np.zeros(0, bool)
    values = np.full(len(c.codes), np.nan, dtype=np.float64)
    if numeric.any():
        text = c.strings
        if style == "en_US":
            text = pc.replace_substring(text, ",", "")
        elif style == "de_DE":
            text = pc.replace_substring(pc.replace_substring(text, ".", ""), ",", ".")
        text = pc.if_else(pa.array(numeric), text, pa.scalar(None, pa.string()))
        floats = pc.cast(text, pa.float64())
        values = np.array(floats.to_numpy(zero_copy_only=False), dtype=np.float64, copy=True)
        values[~numeric] = np.nan
    mark = "," if style == "de_DE" else "."
    per_shape = np.array([_decimals(sh, mark) if ok else -1
                          for sh, ok in zip(c.shapes, is_number, strict=True)], dtype=np.int64)
    decimals = per_shape[c.codes] if len(c.codes) else np.zeros(0, np.int64)
    return Parsed(values, numeric, missing, c.strings, decimals)


def _decimals(shape: str, mark: str) -> int:
    """Digits after the decimal mark in a number's shape (`d,ddd.dd` -> 2, `ddd` -> 0); -1 for an
    exponent form (its precision is not the printed decimals)."""
    if "e" in shape.lower():
        return -1
    head, sep, tail = shape.rpartition(mark)
    return tail.count("d") if sep else 0


def parse_text(items: list[str], style: str | None = None) -> tuple[np.ndarray, str]:
    """Convenience for small inputs and tests: parse Python strings, deciding the style if not given."""
    c = cells(pa.array(items, type=pa.string()))
    chosen = style or decide_style(c).style
    return parse(c, chosen).values, chosen
