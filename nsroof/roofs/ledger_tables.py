"""The ledger's tables, as data: the seeds' sweeps (decode over batch, attention over sequence length) and
the seed ledger's operator table, each row computed through the registry and `analyze`. Pure functions:
`nsroof ledger` renders them as text or JSON."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from nsroof.costs.ledger.core import LedgerError, jsonable
from nsroof.costs.ledger.registry import formulas, operator
from nsroof.roofs.ledger_analysis import Analysis, analyze

if TYPE_CHECKING:
    from nsroof.roofs.machines import Machine

# sequence lengths from short prompts to long context
SWEEP_NS: tuple[int, ...] = (512, 2048, 8192, 32768, 131072)
# decode batch sizes, 1 to a full server batch
SWEEP_BATCHES: tuple[int, ...] = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512)
# what each sweep supplies when the user does not: the sequence lengths (and decode's batch) are swept;
# d defaults to 128, the common head size
SWEEP_DEFAULTS: dict[str, dict[str, Any]] = {
    "decode": {"batch": 1},
    "attention": {"sq": 1, "skv": 1, "d": 128, "batch_heads": 1},
    "attention-traffic": {"sq": 1, "skv": 1, "d": 128},
}
SWEEP_OPS: tuple[str, ...] = tuple(SWEEP_DEFAULTS)
REGIMES: tuple[tuple[str, Callable[[int], int]], ...] = (("prefill", lambda n: n), ("decode", lambda n: 1))

# The operator table `nsroof ledger --sweep` prints.
SEED_TABLE: tuple[tuple[str, str, dict[str, Any]], ...] = (
    ("gemm 4096^3 fp16", "gemm", {"m": 4096, "n": 4096, "k": 4096, "dtype": "fp16"}),
    ("gemm 512^3 fp16", "gemm", {"m": 512, "n": 512, "k": 512, "dtype": "fp16"}),
    ("gemm 128^3 fp16", "gemm", {"m": 128, "n": 128, "k": 128, "dtype": "fp16"}),
    ("attention 32x4096x4096 d128", "attention", {"batch_heads": 32, "sq": 4096, "skv": 4096, "d": 128}),
    ("attention 32x1x8192 d128", "attention", {"batch_heads": 32, "sq": 1, "skv": 8192, "d": 128}),
    ("rmsnorm 8192x4096", "rmsnorm", {"rows": 8192, "hidden": 4096, "weight": "resident"}),
    ("elementwise chain n=16.8M fused", "elementwise", {"n": 16 * 1024 * 1024}),
    ("elementwise chain n=16.8M eager", "elementwise", {"n": 16 * 1024 * 1024, "fused": False}),
    ("qk-norm+rope+quant 4096 tok", "norm-rope-quant",
     {"tokens": 4096, "q_heads": 32, "kv_heads": 8, "head_dim": 128}),
)


def sweep(name: str, shape: Mapping[str, Any], machine: Machine, level: str) -> dict[str, Any]:
    """The seeds' sweep of formula `name` (one of SWEEP_OPS) from the bound `shape`."""
    if name == "decode":
        return decode_sweep(shape, machine, level)
    if name == "attention-traffic":
        return traffic_sweep(shape)
    if name == "attention":
        return attention_sweep(shape, machine, level)
    raise LedgerError(f"--sweep is available for {', '.join(SWEEP_OPS)} (or with no OP), not {name}")


def decode_sweep(shape: Mapping[str, Any], machine: Machine, level: str) -> dict[str, Any]:
    """Decode over batch 1…512: intensity, step time, tokens/s, MFU and regime per batch."""
    rows: list[dict[str, Any]] = []
    for batch in SWEEP_BATCHES:
        a = analyze(operator("decode", **(dict(shape) | {"batch": batch})), machine, level=level)
        d = a.derived
        rows.append({"batch": batch, "intensity": d["intensity"], "step_s": d["step_s"],
                     "tokens_per_s": d["tokens_per_s"], "mfu": d["mfu"], "regime": a.regime,
                     "bound": a.timing.bound})
    op = operator("decode", **shape)
    return {"machine": machine.name, "op": op.label, "params": op.shape["params"], "dtype": op.dtype,
            "roof": op.roof.key, "rows": rows}


def traffic_sweep(shape: Mapping[str, Any]) -> dict[str, Any]:
    """Naive vs tiled attention HBM elements over N 512…131072, prefill (Sq = Skv = N) and decode (Sq = 1)."""
    d = int(shape.get("d", 128))
    base = {"d": d} | {k: v for k, v in shape.items() if k in ("block_m", "block_n", "dtype", "batch_heads")}
    out: dict[str, Any] = {"d": d, "block_m": base.get("block_m", 128)}
    for regime, sq_of in REGIMES:
        rows = []
        for n in SWEEP_NS:
            op = operator("attention-traffic", **(base | {"sq": sq_of(n), "skv": n}))
            rows.append({"n": n, "naive": op.variants["naive"].elements, "tiled": op.cost.elements,
                         "ratio": op.facts["ratio_naive_over_tiled"]})
        out[regime] = rows
    return out


def attention_sweep(shape: Mapping[str, Any], machine: Machine, level: str) -> dict[str, Any]:
    """Fused attention over N 512…131072, prefill and decode: FLOPs, bytes, intensity, SOL time, bound."""
    base = {k: v for k, v in shape.items() if k not in ("sq", "skv")}
    out: dict[str, Any] = {"machine": machine.name}
    for regime, sq_of in REGIMES:
        rows = []
        for n in SWEEP_NS:
            t = analyze(operator("attention", **(base | {"sq": sq_of(n), "skv": n})), machine,
                        level=level).timing
            rows.append({"n": n, "flops": t.flops, "bytes": t.bytes, "intensity": t.intensity,
                         "sol_time_s": t.sol_time_s, "bound": t.bound})
        out[regime] = rows
    return out


def seed_table(machine: Machine, level: str) -> dict[str, Any]:
    """The seed ledger's operators, each under its own roof at `level`'s bandwidth."""
    rows = []
    for label, name, shape in SEED_TABLE:
        a = analyze(operator(name, **shape), machine, level=level)
        rows.append({"operator": label, "op": a.op.label, "roof": a.op.roof.key,
                     "intensity": a.timing.intensity,
                     "bound": a.timing.bound, "memory_time_s": a.timing.memory_time_s,
                     "compute_time_s": a.timing.compute_time_s, "sol_time_s": a.timing.sol_time_s})
    return {"machine": machine.name, "level": level, "rows": rows}


def formula_table() -> list[dict[str, Any]]:
    """Every registered formula with its parameters (name, type, default; None when required)."""
    return [{"name": f.name, "summary": f.summary, "source": f.source,
             "params": [{"name": p.name, "type": p.type.__name__,
                         "default": None if p.required else p.default}
                        for p in f.params]}
            for f in formulas()]


def analysis_json(a: Analysis) -> dict[str, Any]:
    """One analysis as JSON-ready data, with the worst-case traffic and attention-traffic's two
    formulations spelled out."""
    out = a.to_dict()
    op = a.op
    if "worst" in op.variants:
        worst = op.variants["worst"]
        out["bytes_worst"] = jsonable(worst.bytes)
        out["intensity_worst"] = jsonable(worst.intensity)
        out["memory_time_worst_s"] = jsonable(a.variants["worst"].memory_time_s)
    if op.formula == "attention-traffic":
        for name, cost in (("naive", op.variants["naive"]), ("tiled", op.cost)):
            t = a.variants["naive"] if name == "naive" else a.timing
            out[name] = {
                "elements": jsonable(cost.elements),
                "bytes": jsonable(cost.bytes),
                "items": {term.name: jsonable(term.elements) for term in cost.terms
                          if term.elements is not None},
                "memory_time_s": jsonable(t.memory_time_s),
            }
        out["ratio"] = jsonable(op.facts["ratio_naive_over_tiled"])
        out["crossover_block_m"] = jsonable(op.facts["crossover_block_m"])
    return out


def to_json(data: Any) -> Any:
    """Nested table data with NaN/inf as None and integral floats as ints (ledger JSON convention)."""
    if isinstance(data, dict):
        return {k: to_json(v) for k, v in data.items()}
    if isinstance(data, list | tuple):
        return [to_json(v) for v in data]
    return jsonable(data)
