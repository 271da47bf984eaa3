"""Pure roofline maths (Williams, Waterman & Patterson, CACM 2009), vectorised over numpy arrays.

A kernel does W FLOPs and moves Q bytes at a memory level whose roof is B byte/s, under a compute
roof of P FLOP/s:

    intensity  I = W / Q                        [FLOP/byte]
    ridge        = P / B                        [FLOP/byte]
    attainable   = min(P, I * B)                [FLOP/s]
    time floor   = max(W / P, Q / B)            [s]
    bound        = memory if I < ridge, compute if I >= ridge

Every function accepts scalars or arrays and propagates NaN: an unknown input gives an unknown
result, never a guess.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

ArrayLike = npt.ArrayLike
FloatArray = npt.NDArray[np.float64]

#: achieved above a roof by more than this fraction means a counting or unit error
ABOVE_ROOF_TOLERANCE = 0.05


def _f(x: ArrayLike) -> FloatArray:
    return np.asarray(x, dtype=np.float64)


def intensity(flops: ArrayLike, bytes_: ArrayLike) -> FloatArray:
    """W / Q. Zero bytes with positive FLOPs is +inf (nothing to wait for at this level);
    zero over zero is NaN (the kernel did nothing we can place)."""
    w, q = _f(flops), _f(bytes_)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where((q == 0) & (w == 0), np.nan, w / q)


def ridge(peak_flop_per_s: ArrayLike, bandwidth_bytes_per_s: ArrayLike) -> FloatArray:
    with np.errstate(divide="ignore", invalid="ignore"):
        return _f(peak_flop_per_s) / _f(bandwidth_bytes_per_s)


def attainable_flop_per_s(
    intensity_: ArrayLike, peak_flop_per_s: ArrayLike, bandwidth_bytes_per_s: ArrayLike
) -> FloatArray:
    i, p, b = _f(intensity_), _f(peak_flop_per_s), _f(bandwidth_bytes_per_s)
    with np.errstate(invalid="ignore"):
        # np.minimum propagates NaN, which is what we want: unknown roof -> unknown attainable
        return np.minimum(p, i * b)


def time_floor_s(
    flops: ArrayLike, bytes_: ArrayLike, peak_flop_per_s: ArrayLike, bandwidth_bytes_per_s: ArrayLike
) -> FloatArray:
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.maximum(_f(flops) / _f(peak_flop_per_s), _f(bytes_) / _f(bandwidth_bytes_per_s))


def bound(intensity_: ArrayLike, ridge_: ArrayLike) -> npt.NDArray[np.object_]:
    """'memory' below the ridge, 'compute' at or above it, 'unknown' when either is NaN."""
    i, r = _f(intensity_), _f(ridge_)
    known = ~(np.isnan(i) | np.isnan(r))
    out = np.full(i.shape, "unknown", dtype=object)
    out[known & (i < r)] = "memory"
    out[known & (i >= r)] = "compute"
    return out


def rate(amount: ArrayLike, duration_s: ArrayLike) -> FloatArray:
    """amount / duration; NaN when the duration is unknown or not positive."""
    a, d = _f(amount), _f(duration_s)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(d > 0, a / d, np.nan)


def roof_fraction(
    flops: ArrayLike,
    achieved_flop_per_s: ArrayLike,
    attainable_flop_per_s_: ArrayLike,
    achieved_bytes_per_s: ArrayLike,
    bandwidth_bytes_per_s: ArrayLike,
) -> FloatArray:
    """achieved / attainable. A kernel without FLOPs (a copy, a fill) sits on the bandwidth roof
    alone, so its fraction is achieved bytes/s over the bandwidth."""
    w = _f(flops)
    with np.errstate(divide="ignore", invalid="ignore"):
        by_flops = _f(achieved_flop_per_s) / _f(attainable_flop_per_s_)
        by_bytes = _f(achieved_bytes_per_s) / _f(bandwidth_bytes_per_s)
    return np.where(w > 0, by_flops, np.where(w == 0, by_bytes, np.nan))


def above_roof(
    achieved_flop_per_s: ArrayLike,
    peak_flop_per_s: ArrayLike,
    achieved_bytes_per_s: ArrayLike,
    bandwidth_bytes_per_s: ArrayLike,
    tolerance: float = ABOVE_ROOF_TOLERANCE,
) -> npt.NDArray[np.bool_]:
    """True where an achieved rate beats its roof by more than `tolerance` (NaN compares False)."""
    limit = 1.0 + tolerance
    with np.errstate(invalid="ignore"):
        over_flops = _f(achieved_flop_per_s) > limit * _f(peak_flop_per_s)
        over_bytes = _f(achieved_bytes_per_s) > limit * _f(bandwidth_bytes_per_s)
    return np.asarray(over_flops | over_bytes, dtype=bool)


# what most likely puts a row above its roof, by what is above and at which level
CAUSE_CACHE = ("working set {mb:.3g} MB fits the {cache_mb:.3g} MB L2: a cache served bytes counted against "
               "the DRAM roof")
CAUSE_COUNTING = "no cache explains it: a counting or unit error in the bytes, the duration or the roof"
CAUSE_COUNTER = "a roof of another counter than the bytes' (see ceiling_source), or a counting or unit error"
CAUSE_FLOPS = ("FLOPs counted above what ran (an op's cost on another kernel, "
               "or an instruction shape too large)")


# on a CPU (a measured CPU profile): its L2 and L3 can hold an op's whole working set, and its compute peak
# is the best GEMM of a short sweep on operands rotated through memory, measured on a possibly busy CPU
CAUSE_CPU_CACHE = ("working set {mb:.3g} MB fits the CPU's {cache} ({cache_mb:.3g} MB): the cache served "
                   "bytes counted against the DRAM roof")
CAUSE_CPU_FLOPS_CACHED = ("working set {mb:.3g} MB fits the CPU's {cache} ({cache_mb:.3g} MB): "
                          "cache-resident operands can beat a peak timed on operands rotated through memory, "
                          "or the peak was measured low (a busy CPU: --remeasure) — a low roof before a "
                          "FLOP-count error")
CAUSE_CPU_PEAK = ("the measured CPU peak is below what this op reached: measured on a busy CPU or on slower "
                  "shapes than this op's (--remeasure) — a low roof before a FLOP-count error")


def above_roof_cause(level: str, bytes_: float, l2_cache_bytes: float, flops_above: bool,
                     l3_cache_bytes: float = float("nan"), cpu: bool = False) -> str:
    """The likely cause of one above-roof row, in one phrase: FLOPs above the compute roof are a counting
    error; DRAM bytes above the DRAM roof are a cache serving the working set when it fits the L2
    (elementwise ops on a tensor the previous kernel wrote), else a counting or unit error; L2 and L1
    above their roofs come from a roof of another counter or a counting error. A row judged against a
    CPU's measured profile (`cpu`) is `cpu_cause`'s."""
    if cpu:
        return cpu_cause(level, bytes_, l2_cache_bytes, l3_cache_bytes, flops_above)
    if flops_above:
        return CAUSE_FLOPS
    if level == "dram":
        if bytes_ > 0 and l2_cache_bytes > 0 and bytes_ <= l2_cache_bytes:
            return CAUSE_CACHE.format(mb=bytes_ / 1e6, cache_mb=l2_cache_bytes / 1e6)
        return CAUSE_COUNTING
    return CAUSE_COUNTER


def cpu_cause(level: str, bytes_: float, l2_cache_bytes: float, l3_cache_bytes: float,
              flops_above: bool) -> str:
    """An above-roof CPU row: a working set (the row's compulsory bytes) that fits the L2 or the L3 comes
    first — the caches served it, and for FLOPs above the peak cache-resident operands or a peak measured
    low explain it —; FLOPs above the peak without that are a peak measured low; only then the counts. The
    FLOPs of a CPU op row are its formula's, which is why a low roof comes before a FLOP-count error."""
    fits = next(((name, size) for name, size in (("L2", l2_cache_bytes), ("L3", l3_cache_bytes))
                 if bytes_ > 0 and size > 0 and bytes_ <= size), None)
    if flops_above:
        if fits is None:
            return CAUSE_CPU_PEAK
        return CAUSE_CPU_FLOPS_CACHED.format(mb=bytes_ / 1e6, cache=fits[0], cache_mb=fits[1] / 1e6)
    if level == "dram":
        if fits is None:
            return CAUSE_COUNTING
        return CAUSE_CPU_CACHE.format(mb=bytes_ / 1e6, cache=fits[0], cache_mb=fits[1] / 1e6)
    return CAUSE_COUNTER
