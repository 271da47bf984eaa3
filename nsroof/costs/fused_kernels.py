"""The cost of a kernel that fuses several ATen ops (an Inductor kernel), from the ops it fused.

    FLOPs = Σ over its source nodes of the node's ledger formula FLOPs (nsroof.costs.ledger.aten.op_cost on
            the node's argument shapes, dtypes and scalars)
    bytes = Σ of the buffers it reads from outside it + Σ of those it writes that outlive it

which is the point of fusion: an intermediate that stays inside the kernel moves nothing, so the bytes are
the kernel's own, never the sum of its nodes' bytes. A view or reshape node costs nothing. A node that
several kernels of one graph recompute (Inductor inlines a cheap pointwise producer into each consumer)
is counted once in all, each kernel taking an equal share, so a compiled run's FLOPs add up to the eager
run's. A node without a formula makes the kernel's FLOPs NaN, naming the node's op: a sum with a term left
out would be a guess.

The records are what nsroof.collectors.inductor_kernels wrote into the trace (the facts' ``inductor`` key),
one per kernel: ``{"graph", "kernel", "nodes": [{"name", "op", "shapes", "dtypes", "concrete", ...}],
"reads": {buffer: bytes}, "writes": {buffer: bytes}}``. Shared by the profiled and imported paths: anything
that knows a fused kernel's source ops and buffers prices it here.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping
from typing import Any

from nsroof.costs.ledger.aten import VIEW_REASON, OpCost, base_name, op_cost, unknown

FORMULA = "inductor-fused"
# Nodes that make, cast or pick values inside a kernel (a constant, an index range, a dtype cast, one output
# of a multi-output node): no arithmetic, as the ledger's fills, aranges and copies carry none; what they
# write is the kernel's buffers, if anything.
VALUE_MAKERS = frozenset({"scalar_tensor", "iota", "convert_element_type", "getitem"})


def kernel_costs(records: Mapping[str, Mapping[str, Any]]) -> dict[str, OpCost]:
    """The cost of every recorded kernel, by its name in the trace."""
    holders = Counter((r.get("graph"), n.get("name")) for r in records.values() for n in _nodes(r))
    return {name: kernel_cost(r, holders) for name, r in records.items()}


def kernel_cost(record: Mapping[str, Any], holders: Mapping[tuple[Any, Any], int] | None = None) -> OpCost:
    """One kernel's cost (see the module docstring); `holders`: how many kernels of each graph hold each
    node (none given: every node is the kernel's alone)."""
    nodes = _nodes(record)
    if record.get("ambiguous"):
        return unknown("two different Inductor kernels of this name (a forward's and a backward's): which "
                       "one a row ran is not recorded")
    if not nodes and not record.get("reads") and not record.get("writes"):
        return unknown("an Inductor kernel whose source nodes and buffers were not recorded")
    flops, top, missing, counted = 0.0, (-1.0, OpCost(0, 0, "", "", "fp32", "")), [], Counter[str]()
    for node in nodes:
        if base_name(str(node.get("op", ""))) in VALUE_MAKERS:
            continue
        cost = op_cost(str(node.get("op", "")), node.get("shapes"), node.get("dtypes"), node.get("concrete"))
        if cost.missing == VIEW_REASON:
            continue
        if not cost.known:
            missing.append(f"{node.get('op')} ({cost.missing})")
            continue
        share = 1.0 / max(1, (holders or {}).get((record.get("graph"), node.get("name")), 1))
        flops += cost.flops * share
        counted[base_name(str(node.get("op", "")))] += 1
        if cost.flops * share > top[0]:
            top = (cost.flops * share, cost)
    moved = [float(v) for side in ("reads", "writes") for v in (record.get(side) or {}).values()]
    nbytes = math.fsum(moved) if moved and not any(math.isnan(v) for v in moved) else math.nan
    if missing:
        return unknown(f"a fused kernel with an op without a formula: {missing[0]}"
                       + (f" and {len(missing) - 1} more" if len(missing) > 1 else ""))
    if math.isnan(nbytes):
        return unknown("a fused kernel buffer of unknown size (a dynamic shape without a hint)")
    ops = ", ".join(f"{op}×{k}" if k > 1 else op for op, k in counted.most_common(6))
    more = "…" if len(counted) > 6 else ""
    reads, writes = (len(record.get(side) or {}) for side in ("reads", "writes"))
    label = (f"{FORMULA}({sum(counted.values())} ops via the ledger: {ops}{more}; bytes: {reads} buffers "
             f"read, {writes} written)")
    lead = top[1]
    return OpCost(flops, nbytes, FORMULA, label, lead.precision or "fp32", "", lead.tensor_dtype,
                  lead.roof_kind or "simt")


def _nodes(record: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    nodes = record.get("nodes")
    return [n for n in nodes if isinstance(n, Mapping)] if isinstance(nodes, list) else []
