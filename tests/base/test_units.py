"""nsroof.units: ncu unit strings -> (factor to SI base, base unit). Prefixes are decimal (K = 1e3)."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from nsroof.units import UnknownUnitError, known, scale


@pytest.mark.parametrize(
    ("unit", "factor", "base"),
    [
        # time: long (ncu <= 2024.1) and short (2025.1+) spellings give the same factor
        ("nsecond", 1e-9, "second"),
        ("ns", 1e-9, "second"),
        ("usecond", 1e-6, "second"),
        ("us", 1e-6, "second"),
        ("msecond", 1e-3, "second"),
        ("ms", 1e-3, "second"),
        ("second", 1.0, "second"),
        # bytes: decimal prefixes, never 1024
        ("byte", 1.0, "byte"),
        ("Kbyte", 1e3, "byte"),
        ("Mbyte", 1e6, "byte"),
        ("Gbyte", 1e9, "byte"),
        ("Tbyte", 1e12, "byte"),
        # rates
        ("byte/second", 1.0, "byte/second"),
        ("Gbyte/s", 1e9, "byte/second"),
        ("Tbyte/second", 1e12, "byte/second"),
        ("Mbyte/second", 1e6, "byte/second"),
        # frequencies: hz family and cycle/<time> (cycle/nsecond = GHz, cycle/usecond = MHz)
        ("hz", 1.0, "hz"),
        ("Khz", 1e3, "hz"),
        ("Mhz", 1e6, "hz"),
        ("Ghz", 1e9, "hz"),
        ("cycle/second", 1.0, "hz"),
        ("cycle/msecond", 1e3, "hz"),
        ("cycle/usecond", 1e6, "hz"),
        ("cycle/nsecond", 1e9, "hz"),
        # counts and ratios stay as they are
        ("", 1.0, ""),
        ("%", 1.0, "%"),
        ("inst", 1.0, "inst"),
        ("inst/cycle", 1.0, "inst/cycle"),
        ("inst/warp", 1.0, "inst/warp"),
        ("sector", 1.0, "sector"),
        ("sectors", 1.0, "sector"),
        ("sector/request", 1.0, "sector/request"),
        ("sector/nsecond", 1e9, "sector/second"),
        ("register/thread", 1.0, "register/thread"),
        ("byte/block", 1.0, "byte/block"),
        ("Kbyte/block", 1e3, "byte/block"),
        ("Kbyte/cycle", 1e3, "byte/cycle"),
        # ncu's own convention, not physics: 2614 %/byte (base) prints as 2.614 %/Kbyte (auto)
        ("%/Kbyte", 1e3, "%/byte"),
        ("/nsecond", 1e9, "1/second"),
        ("SM", 1.0, "SM"),
        ("cluster", 1.0, "cluster"),
        ("block", 1.0, "block"),
        ("warp", 1.0, "warp"),
        ("pass", 1.0, "pass"),
        ("sample", 1.0, "sample"),
    ],
)
def test_known_units(unit: str, factor: float, base: str) -> None:
    got = scale(unit)
    assert got.base == base
    assert math.isclose(got.factor, factor, rel_tol=1e-12)


@pytest.mark.parametrize("unit", ["furlong", "Xbyte", "byte/fortnight", "Gbyte/s/s", "mbyte", "kinst/parsec"])
def test_unknown_unit_is_an_error_not_a_silent_one(unit: str) -> None:
    with pytest.raises(UnknownUnitError) as err:
        scale(unit)
    assert err.value.unit == unit
    assert not known(unit)


_PREFIX = {"": 1.0, "K": 1e3, "M": 1e6, "G": 1e9, "T": 1e12}


@settings(deadline=None)  # a slow or busy machine must not fail a property on time
@given(
    value=st.floats(min_value=0, max_value=1e6, allow_nan=False),
    prefix=st.sampled_from(sorted(_PREFIX)),
    word=st.sampled_from(["byte", "hz", "sector", "inst"]),
)
def test_prefixed_value_equals_base_value(value: float, prefix: str, word: str) -> None:
    # x <P>word == x * P word, for every decimal prefix and count-like word
    factor, base = scale(prefix + word)
    assert base == scale(word).base
    assert math.isclose(value * factor, value * _PREFIX[prefix], rel_tol=1e-12, abs_tol=0.0)


@settings(deadline=None)  # a slow or busy machine must not fail a property on time
@given(
    num=st.sampled_from(["byte", "Kbyte", "Mbyte", "Gbyte", "cycle", "inst", "sector"]),
    den=st.sampled_from(["second", "msecond", "usecond", "nsecond", "s", "ms", "us", "ns"]),
)
def test_rate_is_numerator_over_denominator(num: str, den: str) -> None:
    # e.g. Gbyte/ms = 1e9 byte / 1e-3 s = 1e12 byte/s
    factor, base = scale(f"{num}/{den}")
    assert math.isclose(factor, scale(num).factor / scale(den).factor, rel_tol=1e-12)
    assert base.endswith("second") or base == "hz"


def test_the_si_formatter() -> None:
    from nsroof.units import human_si, human_si_range

    assert human_si(1.95e13, "FLOP/s") == "19.5 TFLOP/s"
    assert human_si(3.35e12, "B/s") == "3.35 TB/s"
    assert human_si(999.9, "B/s") == "1 kB/s"  # rounds up across the prefix boundary
    assert (human_si(1.2345e12, "B/s", digits=4) == "1.234 TB/s"
            or human_si(1.2345e12, "B/s", digits=4) == "1.235 TB/s")
    assert human_si(float("nan"), "s") == "—" and human_si(None) == "—"
    assert human_si_range(1.9e13, 2e13, "FLOP/s") == "19–20 TFLOP/s"
    assert human_si_range(1.5101e13, 1.5102e13, "FLOP/s") == "15.1 TFLOP/s"  # equal at 3 digits: one value


def test_the_byte_size_formatter() -> None:
    from nsroof.units import human_bytes

    assert human_bytes(80 * 2**30) == "80 GiB"  # whole units print without decimals
    assert human_bytes(1536) == "1.5 KiB"  # 1536 / 1024 = 1.5
    assert human_bytes(50 * 2**20 + 2**19) == "50.5 MiB"
    assert human_bytes(1023) == "1023 B" and human_bytes(0) == "0 B"
    assert human_bytes(None) == "—" and human_bytes(float("nan")) == "—" and human_bytes(float("inf")) == "—"


def test_the_si_formatter_with_fixed_decimals_and_its_missing_text() -> None:
    from nsroof.units import human_si

    # decimals: measure's tables (one decimal under the prefix, no prefix below 1, 0 as 0.0)
    assert human_si(1.95e13, "FLOP/s", decimals=1) == "19.5 TFLOP/s"
    assert human_si(2.0391e12, "B/s", decimals=1) == "2.0 TB/s"
    assert human_si(-2.5e9, "B/s", decimals=1) == "-2.5 GB/s"
    assert human_si(0.5, "B/s", decimals=1) == "0.5 B/s" and human_si(0.0, "B/s", decimals=1) == "0.0 B/s"
    assert human_si(999.96, "B/s", decimals=1) == "1.0 kB/s"  # not '1,000.0 B/s': the prefix moves up
    assert human_si(1.5e21, "B/s", decimals=1) == "1,500.0 EB/s"  # beyond the last prefix: separators
    assert human_si(None, "B/s", decimals=1) == "—"
    # missing: the ledger's lines say n/a
    assert human_si(float("nan"), "FLOP/s", digits=4, missing="n/a") == "n/a"
    assert human_si(9.895e14, "FLOP/s", digits=4, missing="n/a") == "989.5 TFLOP/s"


def test_the_datasheet_figures() -> None:
    from nsroof.units import human_bandwidth, human_tera

    # TFLOP/s without the unit: 4 significant digits, whole with separators from 1,000 on
    assert [human_tera(v) for v in (19.5e12, 989.4e12, 1979e12, 4.5e15, None, 0.0)] == [
        "19.5", "989.4", "1,979", "4,500", "—", "—"]
    assert human_bandwidth(2.039e12) == "2.039 TB/s" and human_bandwidth(900e9) == "900 GB/s"
    assert human_bandwidth(33.45e12) == "33.45 TB/s"
    assert human_bandwidth(None) == human_bandwidth(0.0) == human_bandwidth(float("nan")) == "—"


def test_the_count_formatter() -> None:
    from nsroof.units import human_count

    assert human_count(100_663_296) == "100,663,296" and human_count(2.0) == "2"  # exact integers in full
    assert human_count(1234.56) == "1235"  # 4 significant digits
    assert human_count(12345.6) == "1.235e+04" and human_count(0.125) == "0.125"
    assert human_count(None) == human_count(float("nan")) == "n/a" and human_count(float("inf")) == "inf"
