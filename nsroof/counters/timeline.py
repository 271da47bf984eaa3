"""Wall time on a device: kernels that overlap on streams (an NCCL kernel on its own stream beside compute)
counted once. The summed durations say how long kernels ran; the union of their intervals says how long
the GPU was busy."""

from __future__ import annotations

import numpy as np
import pandas as pd


def busy_s(start_us: np.ndarray, duration_s: np.ndarray, group: np.ndarray) -> np.ndarray:
    """Per group code 0..max(group), the length in seconds of the union of the intervals
    [start_us, start_us + duration_s·1e6) of its rows; NaN for a group with a row whose start or duration is
    unknown (its union cannot be known). Vectorized: sort by (group, start), take the running maximum of the
    ends within the group, and add what each interval reaches past everything that started before it."""
    start = np.asarray(start_us, dtype="float64")
    duration = np.asarray(duration_s, dtype="float64")
    group = np.asarray(group, dtype=np.int64)
    groups = int(group.max()) + 1 if len(group) else 0
    unknown = np.bincount(group, weights=np.isnan(start) | np.isnan(duration), minlength=groups) > 0
    order = np.lexsort((start, group))
    s, g = start[order], group[order]
    e = s + np.maximum(duration[order], 0.0) * 1e6
    reach = pd.Series(e).groupby(g).cummax().to_numpy()  # the latest end of the group so far
    before = np.concatenate([[-np.inf], reach[:-1]])
    before[np.concatenate([[True], g[1:] != g[:-1]])] = -np.inf  # nothing before a group's first interval
    added = np.clip(e - np.maximum(s, before), 0.0, None)
    total = np.bincount(g, weights=np.nan_to_num(added), minlength=groups) * 1e-6
    return np.where(unknown, np.nan, total)


def merged(start_us: np.ndarray, end_us: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The union of the intervals [start, end) as disjoint pieces, sorted: (starts, ends). Intervals with an
    unknown (NaN) bound or no length are left out."""
    s, e = np.asarray(start_us, dtype="float64"), np.asarray(end_us, dtype="float64")
    keep = np.isfinite(s) & np.isfinite(e) & (e > s)
    s, e = s[keep], e[keep]
    if not len(s):
        return s, e
    order = np.argsort(s, kind="stable")
    s, e = s[order], np.maximum.accumulate(e[order])  # the latest end so far
    new = np.concatenate([[True], s[1:] > e[:-1]])  # a piece starts where nothing before reaches
    first = np.flatnonzero(new)
    last = np.concatenate([first[1:] - 1, [len(s) - 1]])
    return s[first], e[last]


def covered_us(pieces: tuple[np.ndarray, np.ndarray], lo: float, hi: float) -> float:
    """How much of [lo, hi) the disjoint sorted `pieces` (merged()) cover, in µs."""
    starts, ends = pieces
    a, b = np.searchsorted(ends, lo, side="right"), np.searchsorted(starts, hi, side="left")
    if b <= a:
        return 0.0
    return float(np.sum(np.minimum(ends[a:b], hi) - np.maximum(starts[a:b], lo)))


def gaps_us(pieces: tuple[np.ndarray, np.ndarray], lo: float, hi: float) -> np.ndarray:
    """The lengths (µs) of the stretches of [lo, hi) that no piece covers, in time order."""
    starts, ends = pieces
    a, b = np.searchsorted(ends, lo, side="right"), np.searchsorted(starts, hi, side="left")
    s = np.maximum(starts[a:b], lo)
    e = np.minimum(ends[a:b], hi)
    bounds_from = np.concatenate([[lo], e])
    bounds_to = np.concatenate([s, [hi]])
    gaps = bounds_to - bounds_from
    return gaps[gaps > 0]
