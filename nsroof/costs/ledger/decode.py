"""One decode step of a dense transformer (decode): every weight read once per step and used by the whole
batch, plus the KV cache when the context and its geometry are given.

Sources: the roofline model (Williams, Waterman, Patterson, CACM 2009): decode I = 2·batch/bytes.
"""

from __future__ import annotations

from nsroof.costs.ledger.core import (
    SRC_ROOFLINE,
    Cost,
    LedgerError,
    Operator,
    Roof,
    Term,
    canonical_dtype,
    dtype_bytes,
    non_negative,
    positive,
)
from nsroof.costs.ledger.registry import register


@register("decode", source=SRC_ROOFLINE)
def decode(
    params: float,
    batch: int = 1,
    dtype: str = "bf16",
    compute_dtype: str = "bf16",
    context: int = 0,
    layers: int = 0,
    heads: int = 0,
    kv_heads: int = 0,
    head_dim: int = 0,
    kv_dtype: str = "",
) -> Operator:
    """One decode step of a dense transformer: every weight read once per step, used by the whole batch."""
    positive("decode", params=params, batch=batch)
    non_negative("decode", context=context)
    dt = canonical_dtype(dtype)
    cdt = canonical_dtype(compute_dtype)
    b = dtype_bytes(dt)
    items = [
        Term("read weights", bytes=params * b, note=f"N·{b:g} B: read once per step, shared by the batch"),
        Term("2·N·batch", flops=2.0 * params * batch,
             note="every weight: one multiply-add per generated token"),
    ]
    notes = ["I = 2·N·batch / (N·bytes) = 2·batch/bytes: depends on batch and weight bytes only"]
    facts: dict[str, float] = {"kv_cache_bytes": 0.0}
    shape: dict[str, float | int | str] = {"params": params, "batch": batch}
    if context > 0:
        missing = [n for n, v in (("layers", layers), ("heads", heads), ("head_dim", head_dim)) if v <= 0]
        if missing:
            raise LedgerError(f"decode: --context needs the KV-cache geometry; missing: {', '.join(missing)}")
        kvh = kv_heads or heads
        kdt = canonical_dtype(kv_dtype or dt)
        kb = dtype_bytes(kdt)
        per_token = 2 * layers * kvh * head_dim * kb  # K and V, every layer
        kv_bytes = batch * context * per_token
        scores = batch * layers * heads * context
        items += [
            Term("read KV cache", bytes=kv_bytes, note=f"batch·context·2·layers·kv_heads·head_dim·{kb:g} B"),
            Term("write new K,V", bytes=batch * per_token, note=f"batch·2·layers·kv_heads·head_dim·{kb:g} B"),
            Term("QK^T + PV over the cache", flops=4.0 * scores * head_dim,
                 note="batch·layers·heads·context scores × head_dim × 2 matmuls × 2 FLOP"),
            Term("softmax over the cache", flops=5.0 * scores, note="5 per score (ledger convention)"),
        ]
        facts["kv_cache_bytes"] = float(kv_bytes)
        facts["kv_bytes_per_token"] = float(per_token)
        shape |= {"context": context, "layers": layers, "heads": heads, "kv_heads": kvh, "head_dim": head_dim}
        if kdt != dt:
            shape["kv_dtype"] = kdt
    else:
        notes.append("KV cache ignored (second-order at small context); "
                     "give --context and the geometry to add it")
    if cdt != "bf16":
        shape["compute_dtype"] = cdt
    return Operator("decode", shape, dt, Cost(tuple(items), tuple(notes)), Roof("matmul", cdt), facts=facts)
