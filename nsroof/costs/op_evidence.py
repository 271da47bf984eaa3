"""What an op's neighbours in a trace's op tree say that its own record lacks (nsroof.costs.attribution asks,
for the ops it costs):

- aten::index / index_put_: the index tensors torch.profiler does not record, from the call's child ops
  (nsroof.costs.ledger.aten.movement.index_evidence);
- a math-path aten::bmm of a causal attention: the SDPA math op above it (forward), or above the forward op
  its autograd node differentiates (backward: the ops table's forward_op_id, from the sequence numbers),
  says `is_causal`. Then its FLOPs count the visible scores only, as every fused attention kernel's formula
  does: causal counted the same way on every path.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np

from nsroof.costs.ledger.aten import OpCost
from nsroof.costs.ledger.aten.args import arg, concrete_values
from nsroof.costs.ledger.aten.movement import index_evidence
from nsroof.costs.ledger.attention import UPPER_LEFT, causal_pairs

MATH_ATTENTION = "aten::_scaled_dot_product_attention_math"
IS_CAUSAL_AT = 5  # _scaled_dot_product_attention_math(query, key, value, attn_mask, dropout_p, is_causal, …)


def with_index_evidence(table: Any, op_id: int, shapes: Any, concrete: Any) -> Any:
    """An index / index_put call's recorded concrete arguments with its unrecorded index tensors (argument 1)
    put in from what its child ops show; unchanged when they show nothing."""
    kids = [(table.name(k), *(a[table.row[k]] for a in table.args)) for k in table.children(op_id)]
    found = index_evidence(shapes[0] if isinstance(shapes, list) and shapes else None, kids)
    if found is None:
        return concrete
    values = list(concrete) if isinstance(concrete, list | tuple) else []
    values += [None] * (2 - len(values))
    return [values[0], found, *values[2:]]


def causal_math(table: Any, op_id: int, cost: OpCost) -> OpCost:
    """A bmm's cost, its FLOPs scaled to the visible scores when it is a causal math-path attention's
    (forward, or backward by its autograd node's forward op); the label says so, or says that is_causal was
    not recorded (then every score is counted)."""
    if not cost.known:
        return cost
    forward = int(table.forward[table.row[op_id]])
    source = forward if forward >= 0 and forward in table else op_id
    sdpa = next((j for j in table.ancestors(source) if table.name(j) == MATH_ATTENTION), -1)
    if sdpa < 0:
        return cost
    r = table.row[sdpa]
    shapes, causal = table.args[0][r], arg(concrete_values(table.args[2][r]), IS_CAUSAL_AT)
    path = "math path, backward" if source != op_id else "math path"
    if causal is None:
        return replace(cost, label=f"{cost.label} [attention ({path}) whose is_causal is not recorded: every "
                                   "score counted]")
    ok = (isinstance(shapes, list) and len(shapes) >= 2
          and all(isinstance(x, list) and len(x) >= 2 for x in shapes[:2]))
    if causal is not True or not ok:
        return cost
    sq, skv = int(shapes[0][-2]), int(shapes[1][-2])
    visible = causal_pairs(sq, skv, UPPER_LEFT)  # torch's is_causal: tril(ones(sq, skv))
    share = visible / max(sq * skv, 1)
    return replace(cost, flops=float(np.float64(cost.flops) * share),
                   label=f"{cost.label} [causal attention ({path}): {visible:,} of {sq * skv:,} scores "
                         "visible per head, counted as the fused kernels count them]")
