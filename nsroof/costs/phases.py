"""Prefill or decode: the `phase` of each row of an LLM serving or `generate()` run.

- An engine's step annotation in the row's path (vLLM/SGLang `execute_…_context_N(…)_generation_M(…)`,
  nsroof.costs.ledger.engine_context): context requests only -> prefill, generation only -> decode, both in
  one step (chunked prefill) -> mixed.
- Else the forward pass the row ran in, told by the token embedding that starts it (aten::embedding, indices
  [batch, query length]): a query length above 1 is a prompt pass (prefill), 1 a one-token step (decode).
  A row belongs to the last embedding lookup that started at or before it. A run without one decode lookup
  is no generate run (a training step embeds whole sequences too): '' for every row.

'' where neither says (rows before the first lookup, runs that are not generation).
"""

from __future__ import annotations

import json
from collections.abc import Sequence

import numpy as np
import pandas as pd

PREFILL, DECODE, MIXED = "prefill", "decode", "mixed"
EMBEDDING_OPS = frozenset({"aten::embedding"})


def engine_phase(nvtx_path: str) -> str:
    """The phase an engine's step annotation in the path states ('' when none)."""
    if "execute" not in nvtx_path:
        return ""
    from nsroof.costs.ledger.engine_context import step_of

    step = step_of(nvtx_path.split("/"))
    if step is None:
        return ""
    prefill, decode = step.context.requests > 0, step.generation.requests > 0
    return MIXED if prefill and decode else PREFILL if prefill else DECODE if decode else ""


def query_length(input_shapes: str) -> int | None:
    """The query length of an aten::embedding call (the last dim of its [batch, length] indices); None when
    the indices are not recorded or flattened to one dim (then batch and length cannot be told apart)."""
    try:
        shapes = json.loads(input_shapes) if input_shapes else None
    except ValueError:
        return None
    if not isinstance(shapes, list) or len(shapes) < 2 or not isinstance(shapes[1], list):
        return None
    indices = shapes[1]
    return int(indices[-1]) if len(indices) >= 2 and isinstance(indices[-1], int) else None


def token_count(input_shapes: str) -> int | None:
    """Sequences × query length of an aten::embedding call (the indices' element count)."""
    length = query_length(input_shapes)
    if length is None:
        return None
    indices = json.loads(input_shapes)[1]
    return int(np.prod(indices))


Texts = Sequence[str] | np.ndarray


def phases(ops: Texts, input_shapes: Texts, nvtx_paths: Texts,
           starts_us: Sequence[float] | np.ndarray) -> np.ndarray:
    """The phase of every row (see the module docstring): rows in `starts_us` order (NaN starts: row
    order)."""
    n = len(ops)
    out = np.full(n, "", dtype=object)
    by_path = {p: engine_phase(p) for p in pd.unique(np.asarray(nvtx_paths, dtype=object))}
    engine = np.array([by_path[p] for p in nvtx_paths], dtype=object)
    if (engine != "").any():
        return engine
    ops_ = np.asarray(ops, dtype=object)
    lookups = np.flatnonzero(np.isin(ops_, list(EMBEDDING_OPS)))
    if not len(lookups):
        return out
    lengths = [query_length(str(input_shapes[int(i)])) for i in lookups]
    if 1 not in lengths:
        return out
    starts = np.asarray(starts_us, dtype="float64")
    order = (np.argsort(starts, kind="stable") if not np.isnan(starts).any()
             else np.arange(n))
    current = ""
    phase_of = {int(i): ("" if q is None else DECODE if q == 1 else PREFILL)
                for i, q in zip(lookups, lengths, strict=True)}
    for i in order:
        current = phase_of.get(int(i), current)
        out[i] = current
    return out

