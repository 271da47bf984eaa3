"""The pure roofline maths: worked examples and invariants."""

from __future__ import annotations

import math

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from nsroof.roofs import roofline

pos = st.floats(min_value=1e-3, max_value=1e18, allow_nan=False, allow_infinity=False)


def test_memory_bound_worked_example() -> None:
    # 2e9 FLOP over 4e8 byte: I = 5 FLOP/byte; A100-ish roofs 19.5e12 FLOP/s, 1.555e12 B/s
    i = roofline.intensity(2e9, 4e8)
    assert i == 5.0
    r = roofline.ridge(19.5e12, 1.555e12)  # 19.5e12 / 1.555e12 = 12.540...
    assert math.isclose(r, 12.540192926, rel_tol=1e-9)
    assert roofline.bound(i, r)[()] == "memory"
    # attainable = min(19.5e12, 5 * 1.555e12 = 7.775e12)
    assert roofline.attainable_flop_per_s(i, 19.5e12, 1.555e12) == 7.775e12
    # floor = max(2e9 / 19.5e12 = 1.0256e-4 s, 4e8 / 1.555e12 = 2.5723e-4 s)
    assert math.isclose(roofline.time_floor_s(2e9, 4e8, 19.5e12, 1.555e12), 4e8 / 1.555e12)


def test_compute_bound_at_and_above_ridge() -> None:
    assert list(roofline.bound([12.0, 13.0, 200.0], 13.0)) == ["memory", "compute", "compute"]


def test_unknown_inputs_give_unknown_results() -> None:
    assert np.isnan(roofline.intensity(np.nan, 1.0))
    assert np.isnan(roofline.intensity(0.0, 0.0))
    assert roofline.intensity(1.0, 0.0) == np.inf
    assert roofline.bound(np.nan, 10.0)[()] == "unknown"
    assert np.isnan(roofline.time_floor_s(1.0, np.nan, 1.0, 1.0))
    assert np.isnan(roofline.rate(1.0, 0.0))


def test_roof_fraction_uses_bandwidth_for_kernels_without_flops() -> None:
    # a copy: 0 FLOPs, 1e9 byte in 1 ms = 1e12 B/s against a 2e12 B/s roof -> 0.5
    f = roofline.roof_fraction(0.0, 0.0, 0.0, 1e12, 2e12)
    assert f == 0.5


def test_above_roof_flags_more_than_five_percent() -> None:
    got = roofline.above_roof([1.04e12, 1.06e12, np.nan], 1e12, [0.0, 0.0, 0.0], 1e12)
    assert list(got) == [False, True, False]


@settings(deadline=None)  # a slow or busy machine must not fail a property on time
@given(w=pos, q=pos, p=pos, b=pos)
def test_attainable_never_exceeds_either_roof(w: float, q: float, p: float, b: float) -> None:
    i = roofline.intensity(w, q)
    att = roofline.attainable_flop_per_s(i, p, b)
    assert att <= p * (1 + 1e-12)
    assert att <= i * b * (1 + 1e-12)
    # the time floor is the time of the work at the attainable rate
    assert math.isclose(roofline.time_floor_s(w, q, p, b), w / att, rel_tol=1e-9)


def test_a_cpu_row_above_its_roof_blames_the_caches_or_the_peak_before_the_flops() -> None:
    l2, l3 = 2 * 2**20, 480 * 2**20  # the development VM: 2 MiB per core, 480 MiB shared (sysfs)
    # an fp32 mm of (512×1024)·(1024×256): 4·(524,288 + 262,144 + 131,072) = 3,670,016 bytes, in L3 not L2
    mm = 3_670_016
    cause = roofline.above_roof_cause("dram", mm, l2, True, l3, cpu=True)
    assert cause.startswith("working set 3.67 MB fits the CPU's L3 (503 MB): cache-resident operands can")
    assert "FLOPs counted" not in cause and cause.endswith("a low roof before a FLOP-count error")
    # 1 MB fits the L2, the nearest cache, which is named
    assert roofline.above_roof_cause("dram", 1e6, l2, True, l3, cpu=True).startswith(
        "working set 1 MB fits the CPU's L2 (2.1 MB)")
    # nothing fits: the measured peak is low (a busy CPU), not the formula's FLOPs
    assert roofline.above_roof_cause("dram", 1e9, l2, True, l3, cpu=True) == roofline.CAUSE_CPU_PEAK
    # bytes above the DRAM roof with the working set in L3: the cache served them
    assert roofline.above_roof_cause("dram", mm, l2, False, l3, cpu=True) == (
        "working set 3.67 MB fits the CPU's L3 (503 MB): the cache served bytes counted against the DRAM "
        "roof")
    assert roofline.above_roof_cause("dram", 1e9, l2, False, l3, cpu=True) == roofline.CAUSE_COUNTING
    # cache sizes unknown (NaN): no cache is claimed
    unknown = roofline.above_roof_cause("dram", mm, math.nan, True, math.nan, cpu=True)
    assert unknown == roofline.CAUSE_CPU_PEAK
    # a GPU row keeps its causes: FLOPs above the peak are a counting error there
    assert roofline.above_roof_cause("dram", mm, 40 * 2**20, True) == roofline.CAUSE_FLOPS
