"""The tables of a machine profile: which keys each may hold, how they are checked when a profile is read
(nsroof.roofs.machines.Machine.from_dict), and the per-cycle arithmetic of its cache levels (at_clocks)."""

from __future__ import annotations

import difflib
import math
from typing import Any

from nsroof.errors import MachineError

# The counters a level's bytes may come from (nsroof.counters.metric_formulas.COUNTER_OF_DEFINITION): the L2
# tag stage (lts__t, every sector, writes included) or the L2 -> SM return path (lts2xbar, reads); the L1 tag
# stage (l1tex__t) or the LSU writeback (lsu). Each has its own roof: A100's L2 serves 96 B/cycle per slice
# at its tag stage but returns 64 B/cycle per slice to the SMs (ncu's peak_sustained in the real reports).
LEVEL_COUNTERS: dict[str, tuple[str, ...]] = {"l2": ("lts__t", "lts2xbar"), "l1": ("lsu", "l1tex__t")}
COUNTER_KEYS: tuple[str, ...] = tuple(f"{lv}.{c}" for lv, cs in LEVEL_COUNTERS.items() for c in cs)
# fp64_tensor: the FP64 tensor-core (DMMA) rate where a datasheet quotes one (A100 19.5, H100 SXM 67 TFLOP/s)
DENSE_DTYPES: tuple[str, ...] = ("fp64", "fp32", "tf32", "bf16", "fp16", "fp8", "int8", "fp4", "fp64_tensor")
SIMT_DTYPES: tuple[str, ...] = ("fp64", "fp32", "fp16")  # the CUDA-core rates the report reads
LEVELS: tuple[str, ...] = ("dram", "l2", "l1", "l3")  # l3: measured CPU profiles
# The keys each rate table may hold: anything else (a typo, "hbm", a SIMT tf32) would be read by
# nobody and leave that roof silently unknown, so it is refused. Keys are compared case-insensitively.
RATE_KEYS: dict[str, tuple[str, ...]] = {
    "peak_flop_per_s": DENSE_DTYPES,
    "sparse_peak_flop_per_s": DENSE_DTYPES,
    "simt_flop_per_s": SIMT_DTYPES,
    "bandwidth_bytes_per_s": LEVELS,
}


def known(value: float) -> bool:
    return value == value and value > 0 and value != math.inf


def cache_at_clocks(bandwidth: dict[str, float], per_cycle: dict[str, float], sm_count: int,
                     clocks: dict[str, float], l2_scale: float) -> dict[str, float]:
    """The L2 and L1 figures of `bandwidth` (plain `l2`, or per counter `l2.lts__t`) at the recorded clocks:
    whole-L2 bytes per cycle × the L2 clock, per-SM bytes per cycle × SMs × the L1 clock; an L2 figure
    without its per-cycle form scales with the SM clock (l2_scale, NaN: not recorded)."""
    out = dict(bandwidth)
    for key in dict.fromkeys(k for k in (*per_cycle, *bandwidth) if k.split(".")[0] in ("l2", "l1")):
        level = key.split(".")[0]
        factor = sm_count if level == "l1" else 1
        if known(clocks[level]) and per_cycle.get(key) and factor:
            out[key] = per_cycle[key] * factor * clocks[level]
        elif level == "l2" and key in out and known(l2_scale):
            out[key] *= l2_scale
    return out


def positive_table(table: Any, name: str, allowed: tuple[str, ...], where: str) -> dict[str, float]:
    if not isinstance(table, dict):
        raise MachineError(f"{where}: '{name}' must be an object of name -> number")
    out: dict[str, float] = {}
    for raw, value in table.items():
        key = str(raw).strip().casefold()
        if key not in allowed:
            raise MachineError(f"{where}: unknown key '{raw}' in '{name}'; known: {', '.join(allowed)}")
        try:
            number = float(value)
        except (TypeError, ValueError):
            raise MachineError(f"{where}: '{name}.{key}' is not a number") from None
        if not known(number):
            raise MachineError(f"{where}: '{name}.{key}' must be a positive finite number")
        out[key] = number
    return out


def counters_table(kwargs: dict[str, Any], where: str) -> dict[str, str]:
    """The `counters` table checked: a level of LEVEL_COUNTERS -> one of its counters, which the per-counter
    tables must not give a second figure for."""
    table = kwargs.get("counters") or {}
    if not isinstance(table, dict):
        raise MachineError(f"{where}: 'counters' must be an object of level -> counter")
    out: dict[str, str] = {}
    for raw, value in table.items():
        level, counter = str(raw).strip().casefold(), str(value).strip()
        if counter not in LEVEL_COUNTERS.get(level, ()):
            known = "; ".join(f"{lv}: {', '.join(cs)}" for lv, cs in LEVEL_COUNTERS.items())
            raise MachineError(f"{where}: 'counters' gives {raw!r}: {value!r}; known: {known}")
        for table_name in ("counter_bytes_per_cycle", "counter_bandwidth_bytes_per_s"):
            if f"{level}.{counter}" in kwargs[table_name]:
                raise MachineError(f"{where}: '{table_name}.{level}.{counter}' repeats the plain {level} "
                                   f"figure, which 'counters' says is the {counter} counter's")
        out[level] = counter
    return out


def derive_cache_bandwidths(kwargs: dict[str, Any]) -> None:
    """L2 and L1 bandwidths at the boost clock from their per-cycle figures, where the entry does not
    print one; each derived number gets its derivation as source."""
    boost = kwargs["clocks_hz"].get("boost")
    per_cycle = kwargs["bytes_per_cycle"]
    bandwidth = dict(kwargs.get("bandwidth_bytes_per_s") or {})
    sources = dict(kwargs.get("sources") or {})
    if not boost:
        return
    for level, factor, how in (("l2", 1, "bytes_per_cycle.l2 × clocks_hz.boost"),
                               ("l1", kwargs["sm_count"], "bytes_per_cycle.l1 × sm_count × clocks_hz.boost")):
        if level in bandwidth or not per_cycle.get(level) or not factor:
            continue
        bandwidth[level] = per_cycle[level] * factor * boost
        sources.setdefault(f"bandwidth_bytes_per_s.{level}",
                           f"derived: {how} (the clock-scaled figure is used "
                           "when the export records clocks)")
    counter_bandwidth = dict(kwargs["counter_bandwidth_bytes_per_s"])
    for key, value in kwargs["counter_bytes_per_cycle"].items():
        factor = kwargs["sm_count"] if key.startswith("l1.") else 1
        if key in counter_bandwidth or not factor:
            continue
        counter_bandwidth[key] = value * factor * boost
        how = "× sm_count " if key.startswith("l1.") else ""
        sources.setdefault(f"counter_bandwidth_bytes_per_s.{key}",
                           f"derived: counter_bytes_per_cycle.{key} {how}× clocks_hz.boost (the "
                           "clock-scaled figure is used when the export records clocks)")
    kwargs["bandwidth_bytes_per_s"] = bandwidth
    kwargs["counter_bandwidth_bytes_per_s"] = counter_bandwidth
    kwargs["sources"] = sources


def known_keys(table: dict[str, float], name: str, where: str) -> dict[str, float]:
    """The table with its keys lower-cased; an unknown key, or one given twice, is an error."""
    known = RATE_KEYS[name]
    out: dict[str, float] = {}
    for raw, value in table.items():
        key = raw.strip().casefold()
        if key not in known:
            close = difflib.get_close_matches(key, known, n=1, cutoff=0.6)
            guess = f" (did you mean '{close[0]}'?)" if close else ""
            raise MachineError(f"{where}: unknown key '{raw}' in '{name}'{guess}; known: {', '.join(known)}")
        if key in out:
            raise MachineError(f"{where}: '{name}' gives '{key}' twice (keys are case-insensitive)")
        out[key] = value
    return out
