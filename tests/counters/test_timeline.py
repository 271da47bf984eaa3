"""The GPU's busy time: overlapping kernels counted once (nsroof.counters.timeline)."""

from __future__ import annotations

import math

import numpy as np

from nsroof.counters.timeline import busy_s


def test_overlapping_intervals_count_once_per_group() -> None:
    start = np.array([5.0, 0.0, 30.0, 0.0, 1.0, 100.0])
    duration = np.array([15.0, 10.0, 10.0, 5.0, 1.0, 2.0]) * 1e-6
    group = np.array([0, 0, 0, 1, 1, 2])
    got = busy_s(start, duration, group)
    # group 0: [0, 10) ∪ [5, 20) ∪ [30, 40) = [0, 20) + [30, 40) = 20 + 10 = 30 µs (summed: 35 µs),
    # in any order
    # group 1: [0, 5) ∪ [1, 2) = 5 µs (the second lies inside the first); group 2: one interval, 2 µs
    assert np.allclose(got, [30e-6, 5e-6, 2e-6], rtol=1e-12, atol=0)


def test_an_unknown_start_leaves_its_group_unknown_and_nothing_is_zero() -> None:
    got = busy_s(np.array([0.0, math.nan, 0.0]), np.array([1e-6, 1e-6, 3e-6]), np.array([0, 0, 1]))
    assert math.isnan(got[0]) and got[1] == 3e-6
    assert busy_s(np.array([]), np.array([]), np.array([], dtype=int)).size == 0
