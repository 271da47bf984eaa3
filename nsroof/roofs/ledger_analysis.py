"""An Operator against a Machine: memory time, compute time, speed-of-light time, the bound, and
the other roofs for contrast. Pure functions; a missing ceiling gives NaN plus the name of the
missing number, never a stand-in.

    memory_time_s  = bytes / bandwidth_bytes_per_s[level]
    compute_time_s = flops / peak_flop_per_s[roof]
    sol_time_s     = max(memory_time_s, compute_time_s)       (full overlap assumed)
    ridge          = peak_flop_per_s / bandwidth_bytes_per_s   (Williams et al., CACM 2009)
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from nsroof.costs.ledger.core import (
    Cost,
    LedgerError,
    Operator,
    Roof,
    canonical_dtype,
    dtype_bytes,
    jsonable,
)

if TYPE_CHECKING:
    from nsroof.roofs.machines import Machine

NAN = math.nan
# The seed's "at the ridge" band: within ±10% of the ridge a verdict is not worth stating.
RIDGE_BAND = 0.10


@dataclass(frozen=True)
class Ceiling:
    value: float  # NaN when the machine does not give it
    key: str  # "peak_flop_per_s.bf16", "bandwidth_bytes_per_s.dram"
    source: str  # citation from the machine profile, or its label

    @property
    def known(self) -> bool:
        return math.isfinite(self.value) and self.value > 0


def _source(machine: Machine, key: str) -> str:
    return machine.sources.get(key) or machine.label


def roof_ceiling(machine: Machine, roof: Roof) -> Ceiling:
    """matmul:<dtype> -> peak_flop_per_s[dtype]; simt:<dtype> -> simt_flop_per_s[dtype], and for fp32
    peak_flop_per_s.fp32 when the profile has no SIMT table (fp32 proper never runs on tensor cores;
    tf32 is its own key)."""
    if roof.kind == "simt":
        key = f"simt_flop_per_s.{roof.dtype}"
        if roof.dtype in machine.simt_flop_per_s:
            return Ceiling(machine.simt_flop_per_s[roof.dtype], key, _source(machine, key))
        if roof.dtype == "fp32" and "fp32" in machine.peak_flop_per_s:
            alt = "peak_flop_per_s.fp32"
            return Ceiling(machine.peak_flop_per_s["fp32"], alt, _source(machine, alt))
        return Ceiling(NAN, key, "")
    key = f"peak_flop_per_s.{roof.dtype}"
    value = machine.peak_flop_per_s.get(roof.dtype, NAN)
    return Ceiling(value, key, _source(machine, key) if math.isfinite(value) else "")


def bandwidth_ceiling(machine: Machine, level: str = "dram") -> Ceiling:
    """The machine's bandwidth at `level`; a level no machine can have is an error (a level this machine
    lacks is an unknown ceiling, NaN)."""
    from nsroof.roofs.machines import LEVELS

    if level not in LEVELS:
        raise LedgerError(f"unknown memory level {level!r}; known: {', '.join(LEVELS)}")
    key = f"bandwidth_bytes_per_s.{level}"
    value = machine.bandwidth_bytes_per_s.get(level, NAN)
    return Ceiling(value, key, _source(machine, key) if math.isfinite(value) else "")


def _div(a: float, b: float) -> float:
    if not (math.isfinite(b) and b > 0) or math.isnan(a):
        return NAN
    return a / b


def verdict(memory_time_s: float, compute_time_s: float) -> str:
    """memory | compute (ties go to memory, as in the seed ledger) | unknown."""
    if math.isnan(memory_time_s) or math.isnan(compute_time_s):
        return "unknown"
    return "memory" if memory_time_s >= compute_time_s else "compute"


def regime(intensity: float, ridge: float) -> str:
    """The seed's three-way reading: memory below 0.9·ridge, compute above 1.1·ridge, else at the ridge."""
    if math.isnan(intensity) or math.isnan(ridge):
        return "unknown"
    if intensity < ridge * (1 - RIDGE_BAND):
        return "memory"
    if intensity > ridge * (1 + RIDGE_BAND):
        return "compute"
    return "at ridge"


@dataclass(frozen=True)
class Timing:
    flops: float
    bytes: float
    intensity: float
    memory_time_s: float
    compute_time_s: float
    sol_time_s: float
    bound: str

    def to_dict(self) -> dict[str, Any]:
        return {k: jsonable(v) for k, v in self.__dict__.items()}


def timing(cost: Cost, peak: Ceiling, bandwidth: Ceiling) -> Timing:
    mem = _div(cost.bytes, bandwidth.value)
    cmp = _div(cost.flops, peak.value)
    sol = NAN if math.isnan(mem) or math.isnan(cmp) else max(mem, cmp)
    return Timing(cost.flops, cost.bytes, cost.intensity, mem, cmp, sol, verdict(mem, cmp))


@dataclass(frozen=True)
class OtherRoof:
    key: str
    peak_flop_per_s: float
    ridge: float
    bound: str  # this operator's bound under that roof

    def to_dict(self) -> dict[str, Any]:
        return {"roof": self.key, "peak_flop_per_s": jsonable(self.peak_flop_per_s),
                "ridge": jsonable(self.ridge), "bound": self.bound}


@dataclass(frozen=True)
class Analysis:
    op: Operator
    machine_name: str
    level: str
    peak: Ceiling
    bandwidth: Ceiling
    ridge: float
    timing: Timing
    regime: str
    variants: dict[str, Timing] = field(default_factory=dict)
    other_roofs: tuple[OtherRoof, ...] = ()
    derived: dict[str, float] = field(default_factory=dict)  # formula-specific (decode: tokens/s, MFU...)
    missing: tuple[str, ...] = ()
    machine_peaks: tuple[str, ...] = ()  # dtypes the machine gives a dense matmul roof for

    def to_dict(self) -> dict[str, Any]:
        t = self.timing
        out: dict[str, Any] = {
            **self.op.to_dict(),
            "machine": self.machine_name,
            "level": self.level,
            "peak_flop_per_s": jsonable(self.peak.value),
            "bandwidth_bytes_per_s": jsonable(self.bandwidth.value),
            "ridge": jsonable(self.ridge),
            "memory_time_s": jsonable(t.memory_time_s),
            "compute_time_s": jsonable(t.compute_time_s),
            "sol_time_s": jsonable(t.sol_time_s),
            "bound": t.bound,
            "regime": self.regime,
            "other_roofs": [r.to_dict() for r in self.other_roofs],
            "sources": {self.peak.key: self.peak.source, self.bandwidth.key: self.bandwidth.source},
            "missing": list(self.missing),
        }
        for name, vt in self.variants.items():
            out["variants"][name].update(
                {k: jsonable(getattr(vt, k)) for k in ("memory_time_s", "compute_time_s", "sol_time_s")}
                | {"bound": vt.bound}
            )
        out.update({k: jsonable(v) for k, v in self.derived.items()})
        return out


def analyze(op: Operator, machine: Machine, *, level: str = "dram") -> Analysis:
    peak = roof_ceiling(machine, op.roof)
    bw = bandwidth_ceiling(machine, level)
    missing = tuple(c.key for c in (peak, bw) if not c.known)
    ridge = _div(peak.value, bw.value)
    main = timing(op.cost, peak, bw)
    variants = {name: timing(cost, peak, bw) for name, cost in op.variants.items()}
    others = tuple(
        OtherRoof(c.key, c.value, _div(c.value, bw.value),
                  "unknown" if math.isnan(_div(c.value, bw.value)) or math.isnan(op.intensity)
                  else ("memory" if op.intensity < c.value / bw.value else "compute"))
        for c in all_roofs(machine)
        if c.key != peak.key
    )
    derived: dict[str, float] = {}
    if op.formula == "decode":
        derived = decode_metrics(op, main, peak, ridge)
    return Analysis(op, machine.name, level, peak, bw, ridge, main, regime(op.intensity, ridge),
                    variants, others, derived, missing, tuple(machine.peak_flop_per_s))


def all_roofs(machine: Machine) -> list[Ceiling]:
    """Every compute roof the machine names: dense matmul peaks, then SIMT peaks."""
    out = [Ceiling(v, f"peak_flop_per_s.{k}", _source(machine, f"peak_flop_per_s.{k}"))
           for k, v in machine.peak_flop_per_s.items()]
    out += [Ceiling(v, f"simt_flop_per_s.{k}", _source(machine, f"simt_flop_per_s.{k}"))
            for k, v in machine.simt_flop_per_s.items()]
    return out


# --------------------------------------------------------------------------- decode


def decode_metrics(op: Operator, t: Timing, peak: Ceiling, ridge: float) -> dict[str, float]:
    """step_s = max(memory, compute time); tokens/s = batch/step_s; MFU = (FLOPs/step_s)/peak;
    batch_to_leave_memory_bound = ridge·bytes/2 (solve I = 2·batch/bytes = ridge)."""
    batch = float(op.shape["batch"])
    step = t.sol_time_s
    return {
        "intensity": t.intensity,
        "step_s": step,
        "tokens_per_s": _div(batch, step),
        "mfu": _div(_div(t.flops, step), peak.value),
        "batch_to_leave_memory_bound": batch_for_compute_bound(ridge, op.dtype),
        "kv_cache_bytes": float(op.facts.get("kv_cache_bytes", 0.0)),
    }


def batch_for_compute_bound(ridge: float, weight_dtype: str) -> float:
    """I = 2·batch/bytes = ridge  =>  batch = ridge·bytes/2 (weights only, KV cache ignored)."""
    return ridge * dtype_bytes(weight_dtype) / 2.0


DECODE_DTYPES: tuple[str, ...] = ("bf16", "fp16", "fp8", "fp32")


def decode_roof(machine: Machine, compute_dtype: str = "bf16") -> Ceiling:
    """The dense matmul roof decode runs under; machines without bf16 (V100, CPUs) fall back to fp16,
    then fp32, and the ceiling's key says which one was used."""
    for dt in (canonical_dtype(compute_dtype), "fp16", "fp32"):
        if dt in machine.peak_flop_per_s:
            key = f"peak_flop_per_s.{dt}"
            return Ceiling(machine.peak_flop_per_s[dt], key, _source(machine, key))
    return Ceiling(NAN, f"peak_flop_per_s.{compute_dtype}", "")


def decode_batch_table(
    machine: Machine, dtypes: Iterable[str] = DECODE_DTYPES, compute_dtype: str = "bf16", level: str = "dram"
) -> dict[str, Any]:
    """The seed's table: the batch at which a decode step leaves the memory-bound regime, per weight dtype,
    with compute at one dense roof (weight-only quantization halves the bytes, not the FLOPs)."""
    roof = decode_roof(machine, compute_dtype)
    bw = bandwidth_ceiling(machine, level)
    ridge = _div(roof.value, bw.value)
    return {
        "roof": roof.key,
        "ridge": ridge,
        "batch": {canonical_dtype(d): batch_for_compute_bound(ridge, d) for d in dtypes},
        "sources": {roof.key: roof.source, bw.key: bw.source},
    }


def ridge_table(machine: Machine) -> dict[str, dict[str, float]]:
    """ridge[roof key][level] = peak / bandwidth, for every roof and every level the machine gives."""
    return {
        c.key: {lvl: _div(c.value, bw) for lvl, bw in machine.bandwidth_bytes_per_s.items()}
        for c in all_roofs(machine)
    }
