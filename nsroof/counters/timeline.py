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
