"""Pure arithmetic on measured points: peaks, saturation, ridges, reference workloads, T*, efficiency.

Reference intensities (FLOP per byte, b = bytes per element), as in the lab's measure_roofline seed:
  batch-1 decode weight GEMV             I = 2/b          (each weight read once, one multiply-add)
  decode attention against the KV cache  I = 2g/b         (GQA group g = query heads per KV head;
                                                           the context length cancels)
  square prefill projection, T tokens    I = 2Td / (b(2T + d))   (2·T·d·d FLOP over b(2Td + d²) bytes)
The ridge is I* = peak / bandwidth; a square [T,d]x[d,d] GEMM reaches it at T* = b·I*·d / (2(d − b·I*)),
and never when b·I* >= d. (The seed prints I*·d / (d − b·I*), which is the same only for b = 2.)
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable, Mapping
from typing import Any

from nsroof.collectors.measure.plan import DTYPE_BYTES


def measured(points: Iterable[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [p for p in points if p.get("kind") == kind and p.get("status") == "measured"]


def best_gemm(points: Iterable[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """dtype -> the measured GEMM point with the highest FLOP/s."""
    best: dict[str, dict[str, Any]] = {}
    for p in measured(points, "gemm"):
        if p["dtype"] not in best or p["flop_per_s"] > best[p["dtype"]]["flop_per_s"]:
            best[p["dtype"]] = p
    return best


def saturation(points: Iterable[dict[str, Any]], fraction: float = 0.9) -> dict[str, dict[str, Any]]:
    """Per dtype: the smallest-FLOP shape reaching `fraction` of that dtype's best rate, and per
    projection the smallest M reaching `fraction` of that projection's own best."""
    pts = measured(points, "gemm")
    best = best_gemm(pts)
    out: dict[str, dict[str, Any]] = {}
    for dtype, top in best.items():
        mine = sorted((p for p in pts if p["dtype"] == dtype), key=lambda p: (p["flop"], p["m"]))
        first = next(p for p in mine if p["flop_per_s"] >= fraction * top["flop_per_s"])
        per_label: dict[str, Any] = {}
        by_label: dict[str, list[dict[str, Any]]] = defaultdict(list)
        for p in mine:
            if p["label"] != "square":
                by_label[p["label"]].append(p)
        for label, series in by_label.items():
            peak = max(p["flop_per_s"] for p in series)
            hit = min((p for p in series if p["flop_per_s"] >= fraction * peak), key=lambda p: p["m"])
            per_label[label] = {"m": hit["m"], "flop_per_s": hit["flop_per_s"],
                                "series_best_flop_per_s": peak,
                                "largest_m_measured": max(p["m"] for p in series)}
        out[dtype] = {"fraction": fraction, "m": first["m"], "n": first["n"], "k": first["k"],
                      "label": first["label"], "flop_per_s": first["flop_per_s"], "projections": per_label}
    return out


def best_stream(points: Iterable[dict[str, Any]]) -> dict[str, Any] | None:
    streams = measured(points, "stream")
    return max(streams, key=lambda p: p["bytes_per_s"]) if streams else None


def ridges(peaks: Mapping[str, float], bandwidths: Mapping[str, float]) -> dict[str, dict[str, float]]:
    """level -> dtype -> peak / bandwidth (FLOP per byte)."""
    return {level: {dtype: peak / bw for dtype, peak in peaks.items()}
            for level, bw in bandwidths.items() if bw > 0}


def t_star(ridge_flop_per_byte: float, d: int, elem_bytes: int) -> float:
    """Tokens T at which a square [T,d]x[d,d] GEMM reaches the ridge: solve 2Td/(b(2T+d)) = I* for T,
    i.e. 2Td = b·I*·(2T + d), so T = b·I*·d / (2(d − b·I*)).
    NaN when b·I* >= d (no batch makes it compute-bound)."""
    denom = d - elem_bytes * ridge_flop_per_byte
    return elem_bytes * ridge_flop_per_byte * d / (2.0 * denom) if denom > 0 else math.nan


def reference_workloads(
    peaks: Mapping[str, float], dram_bytes_per_s: float, *, d: int = 4096, gqa_group: int = 4,
    tokens: int = 2048
) -> list[dict[str, Any]]:
    """Where the lab's three reference workloads land on this machine's DRAM roofline, per dtype."""
    rows: list[dict[str, Any]] = []
    if not dram_bytes_per_s or dram_bytes_per_s <= 0:
        return rows
    for dtype, peak in peaks.items():
        b = DTYPE_BYTES[dtype]
        ridge = peak / dram_bytes_per_s
        cases = (
            ("batch-1 decode weight GEMV", "2/b", 2.0 / b),
            (f"decode attention, GQA g={gqa_group}", "2g/b", 2.0 * gqa_group / b),
            (f"prefill GEMM, T={tokens}, d={d}", "2Td/(b(2T+d))", 2.0 * tokens * d / (b * (2 * tokens + d))),
        )
        for name, formula, intensity in cases:
            rows.append({"dtype": dtype, "workload": name, "formula": formula,
                         "intensity_flop_per_byte": intensity, "ridge_flop_per_byte": ridge,
                         "bound": "memory" if intensity < ridge else "compute",
                         "attainable_flop_per_s": min(peak, dram_bytes_per_s * intensity)})
        rows.append({"dtype": dtype, "workload": f"T* for a square GEMM of width d={d}",
                     "formula": "b·I*·d/(2(d − b·I*))", "t_star_tokens": t_star(ridge, d, b),
                     "ridge_flop_per_byte": ridge})
    return rows


def efficiency(
    peaks: Mapping[str, float], bandwidths: Mapping[str, float], spec: Any | None
) -> dict[str, Any]:
    """Measured / datasheet for every dtype and level the datasheet profile also has; {} without one."""
    if spec is None:
        return {}
    out: dict[str, Any] = {"datasheet": spec.label}
    for table, mine, theirs in (("peak_flop_per_s", peaks, spec.peak_flop_per_s),
                                ("bandwidth_bytes_per_s", bandwidths, spec.bandwidth_bytes_per_s)):
        for key, value in mine.items():
            if theirs.get(key):
                out[f"{table}.{key}"] = {"measured": value, "datasheet": theirs[key],
                                         "fraction": value / theirs[key]}
    return out
