"""The cache ladder: read bandwidth of repeated passes over working sets from 16 KiB to beyond the
last cache, the plateaus in it, and which memory level each plateau is.

One call reads a working set of W bytes `passes` times: `x[:W].expand(passes, W).sum(dim=1)` sums each
row of a view whose rows are the same W bytes (stride 0 along the pass axis), so small sets are timed
without a Python-level loop. One reduce dimension, contiguous: CUDA's reduction then reads it with
vectorized loads, whose rate at L2-sized sets is the cache's, well above DRAM (a full `.sum()` over both
dimensions does not vectorize and measures the kernel instead). Every byte of every pass is counted:
passes·W bytes per call.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from nsroof.collectors.measure.environment import CacheLevel
from nsroof.collectors.measure.plan import Plan
from nsroof.collectors.measure.timing import Timer
from nsroof.units import human_bytes

Progress = Callable[[str], None]
ELEM_BYTES = 4


def passes_for(working_set_bytes: int, bytes_per_call: int) -> int:
    return max(1, round(bytes_per_call / working_set_bytes))


def run_ladder(pool: Any, plan: Plan, timer: Timer, progress: Progress | None = None) -> list[dict[str, Any]]:
    say = progress or (lambda _msg: None)
    points: list[dict[str, Any]] = []
    for ws in plan.ladder_sizes:
        n = ws // ELEM_BYTES
        if n > pool.numel():
            points.append({"kind": "ladder", "working_set_bytes": ws, "status": "skipped",
                           "reason": "larger than the allocated pool"})
            continue
        passes = passes_for(ws, plan.ladder_bytes_per_call)
        view = pool[:n].expand(passes, n)
        t = timer.time(_summer(view), warmup=max(1, plan.warmup), reps=plan.reps)
        total = passes * n * ELEM_BYTES
        time_s = t.of(plan.statistic)
        points.append({"kind": "ladder", "working_set_bytes": n * ELEM_BYTES, "passes": passes,
                       "status": "measured", "bytes_read": total, "bytes": total, "time_s": time_s,
                       "statistic": plan.statistic, "time_median_s": t.median_s,
                       "time_min_s": t.min_s, "time_max_s": t.max_s, "reps": t.reps, "inner": t.inner,
                       "clock": t.clock, "bytes_per_s": total / time_s})
        say(f"ladder {human_bytes(ws)}: {total / time_s / 1e9:,.1f} GB/s")
    return points


def _summer(view: Any) -> Callable[[int], Any]:
    return lambda _i: view.sum(dim=1)


@dataclass(frozen=True)
class Plateau:
    first_bytes: int
    last_bytes: int
    bytes_per_s: float  # median of its points
    points: int


def find_plateaus(working_sets: Sequence[int], bandwidths: Sequence[float], *,
                  drop: float = 0.25) -> list[Plateau]:
    """Split the ladder where bandwidth falls by more than `drop` below the running plateau's median
    and stays there at the next point too (one noisy point on a shared machine is not a level)."""
    pts = sorted((w, b) for w, b in zip(working_sets, bandwidths, strict=True) if b > 0 and math.isfinite(b))
    if not pts:
        return []
    groups: list[list[tuple[int, float]]] = [[pts[0]]]
    for i in range(1, len(pts)):
        level = statistics.median(b for _, b in groups[-1])
        below = pts[i][1] < (1 - drop) * level
        nxt_below = i + 1 >= len(pts) or pts[i + 1][1] < (1 - drop) * level
        if below and nxt_below:
            groups.append([pts[i]])
        else:
            groups[-1].append(pts[i])
    return [Plateau(g[0][0], g[-1][0], statistics.median(b for _, b in g), len(g)) for g in groups]


@dataclass(frozen=True)
class LevelBandwidth:
    level: str
    bytes_per_s: float  # NaN when no working set fits the level's window
    first_bytes: int | None
    last_bytes: int | None
    points: int
    note: str
    used: int = 0  # the fastest points the median is taken over (0: all `points`)

    @property
    def how(self) -> str:
        """'median read rate of 6 point(s)' / 'median read rate of the 3 fastest of 6 points'."""
        if self.used and self.used < self.points:
            return f"median read rate of the {self.used} fastest of {self.points} points"
        return f"median read rate of {self.points} point(s)"


def level_bandwidths(working_sets: Sequence[int], bandwidths: Sequence[float], caches: Sequence[CacheLevel],
                     *, top_k: int = 0) -> list[LevelBandwidth]:
    """Bandwidth of each cache level: the median over working sets that fit comfortably in it (at most
    half its capacity) and not in the level before (above that level's capacity) — over the `top_k`
    fastest of them when top_k > 0. DRAM is the median over working sets of at least 4x the last cache."""
    pts = sorted((w, b) for w, b in zip(working_sets, bandwidths, strict=True) if b > 0 and math.isfinite(b))
    out: list[LevelBandwidth] = []
    lower = 0
    for cache in sorted(caches, key=lambda c: c.bytes):
        window = [(w, b) for w, b in pts if lower < w <= cache.bytes // 2]
        note = (f"working sets in ({human_bytes(lower)}, {human_bytes(cache.bytes // 2)}]: "
                f"half of {human_bytes(cache.bytes)}")
        if not window:
            window = [(w, b) for w, b in pts if lower < w <= cache.bytes]
            note = (f"working sets in ({human_bytes(lower)}, {human_bytes(cache.bytes)}] "
                    "(none fit in half the level)")
        out.append(_level(cache.name, window, note, top_k))
        lower = cache.bytes
    if caches:
        last = max(c.bytes for c in caches)
        out.append(_level("dram", [(w, b) for w, b in pts if w >= 4 * last],
                          f"working sets >= 4x {human_bytes(last)}", top_k))
    return out


def levels_from_plateaus(plateaus: Sequence[Plateau]) -> list[LevelBandwidth]:
    """When the system reports no cache sizes: name the plateaus l1, l2, … in order of working set,
    the last one (largest working sets) dram. Fewer than two plateaus name nothing."""
    if len(plateaus) < 2:
        return []
    names = [f"l{i + 1}" for i in range(len(plateaus) - 1)] + ["dram"]
    return [
        LevelBandwidth(name, p.bytes_per_s, p.first_bytes, p.last_bytes, p.points,
                       f"plateau {human_bytes(p.first_bytes)}–{human_bytes(p.last_bytes)} "
                       "(cache sizes unknown: levels named by order)")
        for name, p in zip(names, plateaus, strict=True)
    ]


def _level(name: str, window: list[tuple[int, float]], note: str, top_k: int = 0) -> LevelBandwidth:
    """The level's bandwidth over its window: the median of all its points, or of the top_k fastest (one
    lucky point cannot set it, one descheduled point cannot lower it)."""
    if not window:
        return LevelBandwidth(name, math.nan, None, None, 0, "no measured working set in its window: " + note)
    rates = sorted((b for _, b in window), reverse=True)
    used = rates[:top_k] if top_k > 0 else rates
    return LevelBandwidth(name, statistics.median(used), window[0][0], window[-1][0], len(window), note,
                          used=len(used))
