"""Embedding lookup (embedding: a gather of table rows, no arithmetic) and its dense backward
(embedding-backward: a zeroed gradient table with each token's gradient added into its row).

Sources: the ledger convention (nsroof.costs.ledger.core).
"""

from __future__ import annotations

from nsroof.costs.ledger.core import (
    SRC_LEDGER,
    SRC_TORCH,
    Cost,
    LedgerError,
    Operator,
    Roof,
    Term,
    canonical_dtype,
    dtype_bytes,
    nbytes,
    non_negative,
    positive,
)
from nsroof.costs.ledger.registry import register


@register("embedding", source=SRC_LEDGER)
def embedding(tokens: int, hidden: int, dtype: str = "fp16", index_dtype: str = "int64",
              unique_tokens: int = 0) -> Operator:
    """Embedding lookup: gather `tokens` rows of `hidden` from a table; no arithmetic."""
    positive("embedding", tokens=tokens, hidden=hidden)
    non_negative("embedding", unique_tokens=unique_tokens)
    dt = canonical_dtype(dtype)
    idt = canonical_dtype(index_dtype)
    b = dtype_bytes(dt)
    distinct = unique_tokens or tokens
    if distinct > tokens:
        raise LedgerError(f"embedding: unique_tokens={unique_tokens} exceeds tokens={tokens}")
    note = ("unique_tokens·hidden: each distinct row once" if unique_tokens
            else "tokens·hidden: every token assumed distinct (give --unique-tokens for fewer)")
    items = (
        Term("read indices", bytes=nbytes(tokens, idt), note=f"tokens·{dtype_bytes(idt):g} B ({idt})"),
        Term("read table rows", bytes=nbytes(distinct * hidden, dt), note=f"{note}·{b:g} B"),
        Term("write output", bytes=nbytes(tokens * hidden, dt), note=f"tokens·hidden·{b:g} B"),
    )
    shape = {"tokens": tokens, "hidden": hidden} | ({"unique_tokens": unique_tokens} if unique_tokens else {})
    return Operator("embedding", shape, dt, Cost(items), Roof("simt", "fp32"))


@register("embedding-backward", source=SRC_TORCH)
def embedding_backward(tokens: int, hidden: int, num_embeddings: int, dtype: str = "fp32",
                       index_dtype: str = "int64") -> Operator:
    """Dense embedding backward: zero the gradient table, then add each token's output gradient \
into its row."""
    positive("embedding-backward", tokens=tokens, hidden=hidden, num_embeddings=num_embeddings)
    dt = canonical_dtype(dtype)
    idt = canonical_dtype(index_dtype)
    b = dtype_bytes(dt)
    items = (
        Term("read indices", bytes=nbytes(tokens, idt), note=f"tokens·{dtype_bytes(idt):g} B"),
        Term("read output gradient", bytes=nbytes(tokens * hidden, dt), note=f"tokens·hidden·{b:g} B"),
        Term("write gradient table", bytes=nbytes(num_embeddings * hidden, dt),
             note=f"num_embeddings·hidden·{b:g} B"),
        Term("scatter-add", flops=1.0 * tokens * hidden, note="1 add per gradient element"),
    )
    return Operator("embedding-backward",
                    {"tokens": tokens, "hidden": hidden, "num_embeddings": num_embeddings}, dt, Cost(items),
                    Roof("simt", "fp32"))
