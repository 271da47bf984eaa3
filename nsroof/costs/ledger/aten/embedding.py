"""aten readers of the embeddings (formulas: nsroof.costs.ledger.embedding): the lookup, its dense backward
and embedding_bag."""

from __future__ import annotations

from typing import Any

from nsroof.costs.ledger.aten.args import (
    Shape,
    arg,
    dtype_of,
    ledger_op,
    move,
    need,
    need_dtype,
    numel,
    recorded,
    register_reader,
)
from nsroof.costs.ledger.core import dtype_bytes


def _embedding(s: list[Shape], t: list[str], c: list[Any]) -> Any:
    need(len(s) >= 2 and len(s[0]) == 2, "embedding needs a 2-D weight and the indices")
    _, hidden = s[0]
    return ledger_op("embedding", tokens=max(numel(s[1]), 1), hidden=hidden, dtype=need_dtype(t, 0),
                     index_dtype=dtype_of(t, 1) or "int64")


def _embedding_backward(s: list[Shape], t: list[str], c: list[Any]) -> Any:
    # embedding_dense_backward(grad_output, indices, num_weights, padding_idx, scale_grad_by_freq);
    # embedding_backward(…, sparse) adds the sparse flag: a sparse gradient is no dense table write
    need(len(s) >= 2 and len(s[0]) >= 1, "embedding backward needs the gradient shape")
    need(not bool(arg(c, 5, False)), "sparse embedding gradients have no formula")
    num_weights = recorded(c, 2, "embedding num_weights not recorded")
    need(isinstance(num_weights, int) and not isinstance(num_weights, bool),
         f"num_weights {num_weights!r} is not an integer")
    hidden = s[0][-1]
    return ledger_op("embedding-backward", tokens=max(numel(s[1]), 1), hidden=hidden,
                     num_embeddings=num_weights, dtype=need_dtype(t, 0),
                     index_dtype=dtype_of(t, 1) or "int64")


def _embedding_bag(s: list[Shape], t: list[str], c: list[Any]) -> Any:
    # _embedding_bag(weight, indices, offsets, scale_grad_by_freq, mode, sparse, per_sample_weights, …):
    # one table row gathered and summed per index, one row written per bag
    need(len(s) >= 3 and len(s[0]) == 2 and len(s[1]) >= 1 and len(s[2]) == 1,
         "needs weight, indices, offsets")
    hidden, indices, bags = s[0][1], numel(s[1]), s[2][0]
    dt = need_dtype(t, 0)
    return move(bags * hidden, indices * hidden, dt, "gather + sum per bag", flops=indices / max(bags, 1),
                other=(indices + bags) * dtype_bytes(need_dtype(t, 1)))


register_reader(("embedding",), _embedding)
register_reader(("embedding_dense_backward", "embedding_backward"), _embedding_backward)
register_reader(("_embedding_bag", "embedding_bag", "_embedding_bag_forward_only"), _embedding_bag)
