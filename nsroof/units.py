"""Nsight Compute unit strings -> (factor to SI base, base unit).

ncu prints units per row and per version: `nsecond`/`ns`, `usecond`/`us`, `Kbyte`, `Gbyte/s`,
`cycle/nsecond` (= GHz), `Ghz`, `inst/cycle`, `%`, `""` for plain counters ... Prefixes are decimal
(K = 1e3: "All byte-based metrics use a factor of 1000 when scaling units to follow SI standards",
Nsight Compute 2019.1 release notes; the CLI's --print-units base|auto in the Nsight Compute CLI docs).

A unit is `numerator[/denominator]`; each side is an optional SI prefix plus a known word (see
`scale` for ncu's convention on prefixed denominators such as `%/Kbyte`). The result
is the factor that turns a value printed in that unit into the base unit, and the base unit's name
(`byte`, `second`, `hz`, `byte/second`, `inst/cycle`, ...). Percent stays percent (factor 1): ncu's
`%` metrics are `pct_of_peak` ratios, and downstream code reads them as percentages.

An unknown word raises UnknownUnitError — never a silent factor of 1.0.
"""

from __future__ import annotations

import functools
import math
from typing import NamedTuple

# word -> (factor to the base word, base word). Time words carry their own prefix.
_WORDS: dict[str, tuple[float, str]] = {
    "": (1.0, ""),
    "%": (1.0, "%"),
    "byte": (1.0, "byte"),
    "bytes": (1.0, "byte"),
    "B": (1.0, "byte"),
    "second": (1.0, "second"),
    "s": (1.0, "second"),
    "nsecond": (1e-9, "second"),
    "ns": (1e-9, "second"),
    "usecond": (1e-6, "second"),
    "us": (1e-6, "second"),
    "msecond": (1e-3, "second"),
    "ms": (1e-3, "second"),
    "hz": (1.0, "hz"),
    "Hz": (1.0, "hz"),
    "cycle": (1.0, "cycle"),
    "cycles": (1.0, "cycle"),
    "inst": (1.0, "inst"),
    "sector": (1.0, "sector"),
    "sectors": (1.0, "sector"),
    "request": (1.0, "request"),
    "requests": (1.0, "request"),
    "warp": (1.0, "warp"),
    "block": (1.0, "block"),
    "thread": (1.0, "thread"),
    "register": (1.0, "register"),
    "pass": (1.0, "pass"),
    "SM": (1.0, "SM"),
    "TPC": (1.0, "TPC"),
    "cluster": (1.0, "cluster"),
    "sample": (1.0, "sample"),
    "wavefront": (1.0, "wavefront"),
    # IMetric.unit() of smsp__*branch* metrics in .ncu-rep reports (the CSV units row prints "" or "warp")
    "branch": (1.0, "branch"),
    "branches": (1.0, "branch"),
    "transaction": (1.0, "transaction"),
    "flop": (1.0, "flop"),
    "op": (1.0, "op"),
}

_PREFIXES: dict[str, float] = {
    "K": 1e3, "k": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "P": 1e15,
    # Small prefixes only make sense on time-like words; ncu prints those spelled out (nsecond).
}


class UnknownUnitError(ValueError):
    """A unit string (or part of one) nsroof does not know."""

    def __init__(self, unit: str, part: str) -> None:
        self.unit = unit
        self.part = part
        super().__init__(f"unknown unit {unit!r}" + (f" (part {part!r})" if part != unit else ""))


class Scale(NamedTuple):
    factor: float  # multiply a printed value by this to get the base unit
    base: str  # the base unit after conversion


def _word(unit: str, part: str) -> tuple[float, str]:
    part = part.strip()
    if part in _WORDS:
        return _WORDS[part]
    if (len(part) > 1 and part[0] in _PREFIXES and part[1:] in _WORDS
            and _WORDS[part[1:]][1] not in ("", "%", "second")):
        factor, base = _WORDS[part[1:]]
        return _PREFIXES[part[0]] * factor, base
    raise UnknownUnitError(unit, part)


@functools.lru_cache(maxsize=4096)
def scale(unit: str) -> Scale:
    """The factor and base unit of an ncu unit string; raises UnknownUnitError."""
    text = unit.strip()
    if "/" in text:
        num, _, den = text.partition("/")
        if "/" in den:
            raise UnknownUnitError(unit, den)
        nf, nb = _word(unit, num)
        df, db = _word(unit, den)
        # ncu scales byte-based units by attaching K/M/G to `byte` wherever it stands and dividing the
        # value: 2614 %/byte (base) prints as 2.614 %/Kbyte (auto), so a prefix on a non-time
        # denominator multiplies like one on the numerator (checked on every converted fixture pair).
        # Time denominators are physical: 1.21 cycle/nsecond = 1.21e9 cycle/second.
        factor = nf / df if db == "second" else nf * df
        if db == "second" and nb in ("cycle", ""):
            base = "hz" if nb == "cycle" else "1/second"
        else:
            base = f"{nb}/{db}"
        return Scale(factor, base)
    factor, base = _word(unit, text)
    return Scale(factor, base)


def known(unit: str) -> bool:
    try:
        scale(unit)
    except UnknownUnitError:
        return False
    return True


def human_time(seconds: float | None, *, decimals: int | None = None) -> str:
    """The one time formatter: seconds in s, ms, us or ns, whichever puts the value at or above 1.
    decimals=None gives 3 significant digits ('1.76 us', '10.7 ms': tables); decimals=n gives n fixed
    decimals ('138.911 us': ledger lines that show the arithmetic). NaN and None are 'n/a'."""
    if seconds is None or seconds != seconds or seconds in (float("inf"), float("-inf")):
        return "n/a"
    unit, factor = next(((u, f) for u, f in (("s", 1.0), ("ms", 1e-3), ("us", 1e-6)) if abs(seconds) >= f),
                        ("ns", 1e-9))
    value = seconds / factor
    return f"{value:.3g} {unit}" if decimals is None else f"{value:.{decimals}f} {unit}"


def human_bytes(n: float | None) -> str:
    """The one byte-size formatter, in binary units as caches and buffers are sized: human_bytes(48 * 2**20)
    == '48 MiB', human_bytes(1.5 * 2**10) == '1.5 KiB', below 1 KiB whole bytes; None, NaN and ±inf are
    '—'."""
    if n is None or not math.isfinite(n):
        return "—"
    for unit, size in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if n >= size:
            value = n / size
            return f"{value:.0f} {unit}" if value == int(value) else f"{value:.1f} {unit}"
    return f"{n:.0f} B"


_SI_PREFIXES: tuple[tuple[float, str], ...] = ((1e18, "E"), (1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M"),
                                               (1e3, "k"), (1.0, ""), (1e-3, "m"), (1e-6, "µ"), (1e-9, "n"))


def human_si(value: float | None, unit: str = "", *, digits: int = 3, decimals: int | None = None,
             missing: str = "—") -> str:
    """The one SI formatter: `digits` significant digits with a decimal SI prefix,
    human_si(1.95e13, 'FLOP/s') == '19.5 TFLOP/s'. decimals=n gives n fixed decimals instead, and no prefix
    below 1: human_si(1.95e13, 'FLOP/s', decimals=1) == '19.5 TFLOP/s', human_si(0.5, 'B/s', decimals=1) ==
    '0.5 B/s' (measure's tables). NaN, ±inf and None are `missing`."""
    if value is None or not math.isfinite(value):
        return missing
    if decimals is not None:
        if not value:
            return f"{0:.{decimals}f} {unit}".strip()
        # the largest prefix at which the value does not print as 1,000 or more
        for scale, prefix in _SI_PREFIXES:
            if scale >= 1.0 and abs(value) >= scale * (1 - 0.5 * 10 ** -(decimals + 3)):
                return f"{value / scale:,.{decimals}f} {prefix}{unit}".strip()
        return f"{value:,.{decimals}f} {unit}".strip()
    if value == 0:
        return f"0 {unit}".strip()
    mag = abs(value)
    for scale, prefix in _SI_PREFIXES:
        if mag >= scale * (1 - 0.5 * 10 ** -digits):
            return f"{value / scale:.{digits}g} {prefix}{unit}".strip()
    return f"{value:.{digits}g} {unit}".strip()


def human_tera(value: float | None) -> str:
    """A datasheet figure in units of 10^12 without the unit (TFLOP/s, TOPS: the column says which), as
    datasheets print it: 4 significant digits, whole numbers with separators from 1,000 on ('19.5', '989.4',
    '1,979'); None or 0 is '—'."""
    if not value:
        return "—"
    return f"{value / 1e12:,.0f}" if value >= 1e15 else f"{value / 1e12:,.4g}"


def human_bandwidth(value: float | None) -> str:
    """A bandwidth as datasheets print it: 4 significant digits under an SI prefix ('2.039 TB/s', '900 GB/s');
    None or 0 is '—'."""
    return human_si(value, "B/s", digits=4) if value else "—"


def human_count(value: float | None) -> str:
    """The one count formatter: exact integers with separators ('100,663,296'), others to 4 significant
    digits (separators from 10,000 on); None and NaN are 'n/a', ±inf 'inf'."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "n/a"
    if math.isinf(value):
        return "inf"
    if float(value).is_integer() and abs(value) < 1e18:
        return f"{int(value):,}"
    return f"{value:,.4g}" if abs(value) >= 1e4 else f"{value:.4g}"


def human_si_range(low: float, high: float, unit: str = "") -> str:
    """Both ends with the prefix of the higher one:
    human_si_range(1.9e13, 2e13, 'FLOP/s') == '19–20 TFLOP/s'."""
    finite = all(v == v and v not in (float("inf"), float("-inf")) for v in (low, high))
    if not finite or human_si(low, unit) == human_si(high, unit):
        return human_si(high, unit)  # equal at the precision shown
    number, _, rest = human_si(high, unit).partition(" ")
    scale = high / float(number) if float(number) else 1.0
    return f"{low / scale:.3g}–{number} {rest}".strip()
