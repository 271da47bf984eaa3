"""Numbers in ncu CSV cells: the style is decided once per file from its evidence, then applied to
every cell (nsroof.importers.ncu.locale_numbers)."""

from __future__ import annotations

import math

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from nsroof.importers.ncu import locale_numbers as numbers
from tests._locale_text import localized


def decide(cells: list[str]) -> numbers.StyleDecision:
    return numbers.decide_style(numbers.cells(pa.array(cells, type=pa.string())))


@pytest.mark.parametrize(
    ("cells", "style"),
    [
        (["2249873280", "1443405676.69", "0.00"], "C"),  # LC_ALL=C: '.' decimal, no grouping
        (["2,249,873,280", "1,443,405,676.69"], "en_US"),
        (["5,318,969,728.00", "16,764,800,860,160.00"], "en_US"),  # --print-fp
        (["2.249.873.280", "1.443.405.676,69"], "de_DE"),
        (["65,77", "12"], "de_DE"),  # ',' before 2 digits can only be a decimal comma
        (["7,488", "512"], "en_US"),  # ',' before exactly 3 digits: ncu never prints 3 decimals -> grouping
        (["2.508", "17"], "de_DE"),  # '.' before exactly 3 digits: grouping
        (["0", "17", "n/a", ""], "C"),  # no evidence at all
        (["7,488", "1.38"], "en_US"),  # the weak ',' is confirmed by a '.' decimal
    ],
)
def test_style_is_decided_from_the_evidence(cells: list[str], style: str) -> None:
    assert decide(cells).style == style


def test_one_cell_does_not_override_the_file() -> None:
    # `7,488` alone would be read as 7488 (en_US); with a de_DE decimal elsewhere the whole file is de_DE
    values, style = numbers.parse_text(["7,488", "65,77"])
    assert style == "de_DE"
    assert values.tolist() == pytest.approx([7.488, 65.77])


def test_conflicting_styles_are_reported_with_both_cells() -> None:
    decision = decide(["1,234.50", "0", "1.234,50"])
    assert decision.conflict == (0, 2)


def test_ambiguous_file_is_read_as_en_us_and_says_so() -> None:
    decision = decide(["7,488", "2.508"])
    assert decision.style == "en_US"
    assert decision.evidence.startswith("ambiguous")


@pytest.mark.parametrize(
    ("cell", "expected"),
    [
        ("1,009,150,443.18", 1009150443.18),
        # instance values: aggregate
        ("283541588736 (47256845568; 47256869888; 47256869888)", 283541588736.0),
        ("-3.5", -3.5),
        ("1e+05", 1e5),
        ("inf", math.inf),
    ],
)
def test_en_us_values(cell: str, expected: float) -> None:
    values, _ = numbers.parse_text([cell, "1,234.5"])
    assert values[0] == expected


def test_missing_and_string_cells() -> None:
    c = numbers.cells(pa.array(["", "n/a", "no data", "nan", "N/A", "CachePreferNone", "(128, 1, 1)", "42"]))
    parsed = numbers.parse(c, "C")
    assert parsed.missing.tolist() == [True, True, True, True, True, False, False, False]
    assert parsed.numeric.tolist() == [False] * 7 + [True]
    assert np.isnan(parsed.values[:7]).all() and parsed.values[7] == 42.0
    assert parsed.strings[5].as_py() == "CachePreferNone"


# Evidence every real file carries: a grouped integer and a 2-decimal float (ncu prints doubles with 2).
_ANCHORS = {"C": ["1443405676.69"], "en_US": ["1,443,405,676.69"], "de_DE": ["1.443.405.676,69"]}


@settings(max_examples=60, deadline=None)
@given(
    style=st.sampled_from(["C", "en_US", "de_DE"]),
    values=st.lists(st.integers(min_value=0, max_value=10**15), min_size=1, max_size=20),
    cents=st.lists(st.integers(min_value=0, max_value=99), min_size=20, max_size=20),
)
def test_round_trip_in_each_locale(style: str, values: list[int], cents: list[int]) -> None:
    # an exact decimal with 2 places, printed the way ncu prints it in that locale, parses back to itself
    exact = [v + c / 100 for v, c in zip(values, cents[: len(values)], strict=True)]
    cells = [localized(x, style, 2) for x in exact] + _ANCHORS[style]
    parsed, chosen = numbers.parse_text(cells)
    assert chosen == style
    for got, want in zip(parsed, exact, strict=False):
        assert got == pytest.approx(want, rel=1e-15, abs=1e-9)


@settings(max_examples=60, deadline=None)
@given(style=st.sampled_from(["C", "en_US", "de_DE"]),
       values=st.lists(st.integers(0, 10**12), min_size=1, max_size=10))
def test_integers_round_trip(style: str, values: list[int]) -> None:
    cells = [localized(v, style, 0) for v in values] + _ANCHORS[style]
    parsed, chosen = numbers.parse_text(cells)
    assert chosen == style
    assert parsed[: len(values)].tolist() == [float(v) for v in values]


def test_shapes_replace_digits_only() -> None:
    arr = pa.array(["1,234.5", "Größe 42", None, "n/a"])
    assert numbers.shapes_of(numbers._as_strings(arr)).to_pylist() == ["d,ddd.d", "Größe dd", "", "n/a"]
