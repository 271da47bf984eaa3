"""The ledger record: what an operator *has* to do, in FLOPs and compulsory bytes.

Accounting convention (the roofline model's compulsory traffic, Williams, Waterman, Patterson, CACM 2009):
every distinct input is read once, every output written once, intermediates never count;
a basic arithmetic op and a transcendental (exp, rsqrt, sin, ...) are 1 FLOP each on the
ledger (not a hardware cost); one multiply-add inside a contraction is 2 FLOP.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from nsroof.errors import NsroofError


class LedgerError(NsroofError):
    """An unknown formula, a bad shape or dtype, a duplicate registration."""


# Bytes per element. fp4 packs two values per byte; int64 is here because index tensors are int64.
DTYPE_BYTES: dict[str, float] = {
    "fp64": 8,
    "fp32": 4,
    "tf32": 4,  # tf32 is stored as fp32; only the tensor-core multiply truncates the mantissa
    "bf16": 2,
    "fp16": 2,
    "fp8": 1,
    "int8": 1,
    "int32": 4,
    "int64": 8,
    "fp4": 0.5,
}

_DTYPE_ALIASES: dict[str, str] = {
    "float64": "fp64", "double": "fp64", "float32": "fp32", "float": "fp32", "half": "fp16",
    "float16": "fp16", "bfloat16": "bf16", "float8": "fp8", "e4m3": "fp8", "e5m2": "fp8",
    "float8_e4m3fn": "fp8", "float8_e5m2": "fp8", "long": "int64", "int": "int32",
    "nvfp4": "fp4", "mxfp4": "fp4",
}


def canonical_dtype(dtype: str) -> str:
    """'bfloat16' -> 'bf16'; an unknown dtype is an error that lists the known ones."""
    key = str(dtype).strip().lower().removeprefix("torch.")
    key = _DTYPE_ALIASES.get(key, key)
    if key not in DTYPE_BYTES:
        raise LedgerError(f"unknown dtype {dtype!r}; known: {', '.join(DTYPE_BYTES)}")
    return key


def dtype_bytes(dtype: str) -> float:
    return DTYPE_BYTES[canonical_dtype(dtype)]


def nbytes(elements: float, dtype: str) -> float:
    return elements * dtype_bytes(dtype)


# Printed by `nsroof ledger` (each formula's source): public sources only (the seed documents these formulas
# grew from are not shipped); nsroof's own derivations name the ledger, each family file holding its algebra.
SRC_ROOFLINE = "roofline model: Williams, Waterman & Patterson, Roofline, CACM 52(4), 2009"
SRC_LEDGER = "ledger convention: inputs read once, outputs written once (compulsory traffic)"
SRC_TRAFFIC = ("HBM element-traffic model of attention: Dao et al., FlashAttention, NeurIPS 2022 (naive vs "
               "tiled traffic)")
SRC_LAYER = "NVIDIA Deep Learning Performance Guide, GPU Performance Background (worked example)"
SRC_CNN = "nsroof ledger (ledger convention; counted from each op's definition)"
SRC_SEQ = SRC_CNN
SRC_TORCH = "nsroof ledger (ledger convention; backward derived from the forward algebra)"


def positive(formula: str, **values: float) -> None:
    for name, value in values.items():
        if not value > 0:
            raise LedgerError(f"{formula}: {name} must be > 0, got {value}")


def non_negative(formula: str, **values: float) -> None:
    for name, value in values.items():
        if value < 0:
            raise LedgerError(f"{formula}: {name} must be >= 0, got {value}")


@dataclass(frozen=True)
class Term:
    """One line of the ledger."""

    name: str
    flops: float = 0.0  # FLOPs this line does (multiply-add = 2, transcendental = 1)
    bytes: float = 0.0  # compulsory DRAM bytes this line moves
    note: str = ""  # the arithmetic or assumption behind the line
    elements: float | None = None  # elements moved, where the model counts elements (attention traffic)


@dataclass(frozen=True)
class Cost:
    """Frozen, additive: (FLOPs, bytes) with the named terms that sum to them."""

    terms: tuple[Term, ...] = ()
    notes: tuple[str, ...] = ()

    @property
    def flops(self) -> float:
        return float(math.fsum(t.flops for t in self.terms))

    @property
    def bytes(self) -> float:
        return float(math.fsum(t.bytes for t in self.terms))

    @property
    def elements(self) -> float:
        return float(math.fsum(t.elements or 0 for t in self.terms))

    @property
    def intensity(self) -> float:
        """FLOP per byte; inf when nothing moves, NaN when there is neither work nor traffic."""
        if self.bytes > 0:
            return self.flops / self.bytes
        return math.inf if self.flops > 0 else math.nan

    def __add__(self, other: Cost) -> Cost:
        if not isinstance(other, Cost):
            return NotImplemented
        return Cost(self.terms + other.terms,
                    self.notes + tuple(n for n in other.notes if n not in self.notes))

    def scaled(self, factor: float, label: str = "") -> Cost:
        """The same cost repeated `factor` times (e.g. per launch -> per aggregated row)."""
        suffix = f" ×{label or _fmt(factor)}"
        return Cost(
            tuple(
                Term(t.name + suffix, t.flops * factor, t.bytes * factor, t.note,
                     None if t.elements is None else t.elements * factor)
                for t in self.terms
            ),
            self.notes,
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "flops": jsonable(self.flops),
            "bytes": jsonable(self.bytes),
            "intensity": jsonable(self.intensity),
            "terms": [
                {"name": t.name, "flops": jsonable(t.flops), "bytes": jsonable(t.bytes), "note": t.note}
                | ({} if t.elements is None else {"elements": jsonable(t.elements)})
                for t in self.terms
            ],
            "notes": list(self.notes),
        }


RoofKind = Literal["matmul", "simt"]


@dataclass(frozen=True)
class Roof:
    """The compute roof an operator stands under.

    matmul:<dtype> is Machine.peak_flop_per_s[dtype] (the best dense rate a matmul of that dtype
    reaches, tensor cores where they serve it); simt:<dtype> is Machine.simt_flop_per_s[dtype]
    (CUDA cores), the roof of norms, elementwise chains and anything else not run as a matmul.
    """

    kind: RoofKind
    dtype: str

    @property
    def key(self) -> str:
        return f"{self.kind}:{self.dtype}"


def simt_roof(dt: str) -> Roof:
    """The CUDA-core roof of an op on `dt` data: fp64 at the fp64 rate, every narrower dtype at fp32's."""
    return Roof("simt", "fp64" if dt == "fp64" else "fp32")


@dataclass(frozen=True)
class Operator:
    """One ledger entry: a named formula applied to a shape and dtype, with its cost and roof.

    `variants` holds alternative costs of the same operator (gemm: the no-reuse worst case;
    attention-traffic: the naive three-kernel formulation) for contrast; `cost` is the one the
    ledger stands by (the compulsory minimum). `facts` are exact derived numbers a formula
    exposes beyond the cost (e.g. decode's KV-cache bytes).
    """

    formula: str
    shape: Mapping[str, Any]
    dtype: str
    cost: Cost
    roof: Roof
    variants: Mapping[str, Cost] = field(default_factory=dict)
    facts: Mapping[str, float] = field(default_factory=dict)

    @property
    def flops(self) -> float:
        return self.cost.flops

    @property
    def bytes(self) -> float:
        return self.cost.bytes

    @property
    def intensity(self) -> float:
        return self.cost.intensity

    @property
    def label(self) -> str:
        """`gemm(m=64, n=256, k=128, dtype=fp32)`: how the report's ledger_op names it."""
        args = ", ".join(f"{k}={_fmt(v)}" for k, v in self.shape.items())
        return f"{self.formula}({args}{', ' if args else ''}dtype={self.dtype})"

    def to_dict(self) -> dict[str, Any]:
        return {
            "op": self.formula,
            "label": self.label,
            "shape": {k: jsonable(v) for k, v in self.shape.items()},
            "dtype": self.dtype,
            "roof": self.roof.key,
            **self.cost.to_dict(),
            "variants": {k: v.to_dict() for k, v in self.variants.items()},
            "facts": {k: jsonable(v) for k, v in self.facts.items()},
        }


def jsonable(value: Any) -> Any:
    """Integral floats as ints (so 4294967296.0 prints as 4294967296); inf/NaN as None."""
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return value
    if isinstance(value, (int, float)):
        f = float(value)
        if not math.isfinite(f):
            return None
        if f.is_integer() and abs(f) < 2**63:
            return int(f)
        return f
    return value


def _fmt(value: Any) -> str:
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def terms(*items: Term | Iterable[Term]) -> tuple[Term, ...]:
    out: list[Term] = []
    for item in items:
        if isinstance(item, Term):
            out.append(item)
        else:
            out.extend(item)
    return tuple(out)
