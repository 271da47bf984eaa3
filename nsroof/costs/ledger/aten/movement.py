"""aten readers of data movement (formula: nsroof.costs.ledger.pointwise at 0 FLOP: inputs read once, the
output written once): cat and stack, pad, repeat, the view backwards, gather / scatter / index_select,
advanced indexing (index, index_put_) from the evidence of its child ops, fills, arange and dtype
conversion."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from nsroof.costs.ledger.aten.args import (
    SCALAR_TYPES,
    TORCH_DTYPES,
    Shape,
    Unrecorded,
    arg,
    concrete_values,
    dtype_of,
    move,
    need,
    need_dtype,
    numel,
    recorded,
    register_reader,
)
from nsroof.costs.ledger.core import dtype_bytes

INDICES_UNRECORDED = "the index tensors (a list of optional tensors) are not recorded by torch.profiler"


def _tensor_list(s: list[Shape], at: int = 0) -> list[Shape]:
    shapes: Any = s[at] if len(s) > at else []
    need(isinstance(shapes, list) and bool(shapes) and all(isinstance(x, list) for x in shapes),
         "the tensor list's shapes are not recorded")
    return shapes


def _cat(s: list[Shape], t: list[str], c: list[Any]) -> Any:
    # cat / stack(Tensor[] tensors, int dim): every input copied once into the output
    parts = [x for x in _tensor_list(s) if numel(x) > 0]
    need(bool(parts), "cat of empty tensors")
    n = sum(numel(x) for x in parts)
    dt = {"TensorList": "fp32"}.get(t[0], "") if t else ""
    return move(n, n, dt or "fp32", "copy into the output")


def _pad(s: list[Shape], t: list[str], c: list[Any]) -> Any:
    # pad / constant_pad_nd / reflection_pad*d / replication_pad*d(input, pad, …): pads from the last dim
    need(len(s) >= 1 and len(s[0]) >= 1, "pad needs the input shape")
    pads = recorded(c, 1, "pad sizes not recorded")
    need(isinstance(pads, list) and len(pads) % 2 == 0, f"pad {pads!r} is not pairs of sizes")
    out = list(s[0])
    for i in range(len(pads) // 2):
        out[-1 - i] += pads[2 * i] + pads[2 * i + 1]
    return move(numel(out), numel(s[0]), need_dtype(t, 0), "copy + fill the border")


def _repeat(s: list[Shape], t: list[str], c: list[Any]) -> Any:
    reps = recorded(c, 1, "repeat counts not recorded")
    need(isinstance(reps, list) and len(s) >= 1, "repeat needs the input and its counts")
    return move(numel(s[0]) * numel(reps), numel(s[0]), need_dtype(t, 0), "tiled copy")


def _grad_to_size(size_at: int) -> Any:
    """slice_backward / select_backward / narrow…(grad, input_sizes, dim, …): a zeroed input-sized gradient
    with grad copied into its window."""

    def read(s: list[Shape], t: list[str], c: list[Any]) -> Any:
        size = recorded(c, size_at, "input sizes not recorded")
        need(isinstance(size, list) and len(s) >= 1, "needs grad and the input sizes")
        return move(numel(size), numel(s[0]), need_dtype(t, 0), "zero fill + copy of the window")

    return read


def _index_select(s: list[Shape], t: list[str], c: list[Any]) -> Any:
    # index_select(self, dim, index): index.numel slices of self along dim
    need(len(s) >= 3 and len(s[0]) >= 1, "index_select needs self and index")
    dim = recorded(c, 1, "index_select dim not recorded")
    x = s[0]
    out = numel(s[2]) * numel(x) // max(x[dim % len(x)], 1)
    return move(out, out, need_dtype(t, 0), "gather rows", other=numel(s[2]) * dtype_bytes(need_dtype(t, 2)))


def _gather(s: list[Shape], t: list[str], c: list[Any]) -> Any:
    # gather(self, dim, index, sparse_grad): one element of self per index element
    need(len(s) >= 3 and len(s[2]) >= 1, "gather needs the index")
    n = numel(s[2])
    return move(n, n, need_dtype(t, 0), "gather", other=n * dtype_bytes(need_dtype(t, 2)))


def _scatter(accumulate: bool, src_at: int, index_at: int) -> Any:
    """scatter_(self!, dim, index, src) / scatter_add_ / index_add_(self!, dim, index, source, alpha):
    src and index read; the addressed elements of self written (and read when accumulating)."""

    def read(s: list[Shape], t: list[str], c: list[Any]) -> Any:
        need(len(s) > max(src_at, index_at) and len(s[src_at]) >= 1, "scatter needs index and src")
        n = numel(s[src_at])
        dt = need_dtype(t, 0)
        return move(n, n * (2 if accumulate else 1), dt, "scatter-add" if accumulate else "scatter",
                    other=numel(s[index_at]) * dtype_bytes(need_dtype(t, index_at)),
                    flops=1.0 if accumulate else 0.0)

    return read


def _fill(size_at: int | None, dtype_at: int | None) -> Any:
    """zeros / ones / full(size, …) and zeros_like / ones_like / full_like(self, …): one write per element."""

    def read(s: list[Shape], t: list[str], c: list[Any]) -> Any:
        if size_at is None:
            need(len(s) >= 1 and len(s[0]) >= 0 and dtype_of(t, 0) is not None, "needs the input")
            n, dt = numel(s[0]), need_dtype(t, 0)
        else:
            size = recorded(c, size_at, "the size was not recorded")
            need(isinstance(size, list), f"size {size!r}")
            if dtype_at is not None and len(c) <= dtype_at:
                raise Unrecorded("the dtype was not recorded")
            code = arg(c, dtype_at) if dtype_at is not None else None
            dt = SCALAR_TYPES.get(code, "fp32") if code is not None else "fp32"
            n = numel(size)
        need(n > 0, "an empty tensor")
        return move(n, 0, dt, "fill")

    return read


def _arange(s: list[Shape], t: list[str], c: list[Any]) -> Any:
    # arange(end, …) / arange.start(start, end, …) / arange.start_step(start, end, step, …): all scalars
    values = [v for v in c[:3] if isinstance(v, int | float) and not isinstance(v, bool)]
    need(bool(values), "arange bounds not recorded")
    kinds = [x for x in t[:3] if x]
    if len(values) >= 3 and kinds[:3] == ["Scalar"] * 3:
        start, end, step = values[:3]
    elif len(values) >= 2 and kinds[:2] == ["Scalar"] * 2:
        start, end, step = values[0], values[1], 1
    else:
        start, end, step = 0, values[0], 1
    n = max(math.ceil((end - start) / step), 0)
    need(n > 0, "an empty range")
    floating = any(isinstance(v, float) for v in (start, end, step))
    return move(n, 0, "fp32" if floating else "int64", "write the range", flops=1.0)


@dataclass(frozen=True)
class IndexEvidence:
    """What an aten::index / index_put_ call's own child ops say about the index tensors torch.profiler does
    not record (index_evidence): the indexed elements' shape and each index tensor's shape and dtype. The
    attribution passes it as the call's `indices` argument."""

    result: tuple[int, ...]
    indices: tuple[tuple[tuple[int, ...], str], ...]

    @property
    def index_bytes(self) -> float:
        return float(sum(numel(list(shape)) * dtype_bytes(TORCH_DTYPES.get(dt, "int64"))
                         for shape, dt in self.indices))


INDEX_OPS = frozenset({"index", "index_put", "_index_put_impl", "_index_put_impl_"})


def index_evidence(self_shape: Any, children: list[tuple[str, Any, Any, Any]]) -> IndexEvidence | None:
    """The index tensors of an aten::index / _index_put_impl_ call from its direct child ops, in call order
    (name, Input Dims, Input type, Concrete Inputs): torch's advanced indexing restrides self to the indexed
    shape (`aten::as_strided(self, size, strides)`, 0 strides on the indexed dims: `size` is the shape of the
    gathered / scattered elements) and reshapes each index tensor to broadcast against it (`aten::reshape`
    of an integer tensor: its shape and dtype; a boolean mask arrives as the long index tensors its
    `aten::nonzero` made). None when the children do not show both (an older torch, a fused path)."""
    result: tuple[int, ...] | None = None
    indices: list[tuple[tuple[int, ...], str]] = []
    for name, shapes, dtypes, concrete in children:
        shapes, dtypes, values = list(shapes or []), list(dtypes or []), concrete_values(concrete)
        if name == "aten::as_strided" and result is None and shapes and shapes[0] == self_shape:
            size = arg(values, 1)
            if isinstance(size, list) and all(isinstance(n, int) for n in size):
                result = tuple(size)
        elif name == "aten::reshape" and result is not None and shapes and isinstance(shapes[0], list) \
                and str(dtypes[0] if dtypes else "") in ("long int", "int"):
            indices.append((tuple(shapes[0]), str(dtypes[0])))
    return IndexEvidence(result, tuple(indices)) if result is not None and indices else None


def _evidence(c: list[Any]) -> IndexEvidence:
    found = arg(c, 1)
    if not isinstance(found, IndexEvidence):
        raise Unrecorded(INDICES_UNRECORDED + " (and its child ops do not show them)")
    return found


def _index(s: list[Shape], t: list[str], c: list[Any]) -> Any:
    # index(self, Tensor?[] indices): the indexed elements of self read and written out, each index
    # tensor read
    need(len(s) >= 1 and len(s[0]) >= 1, "index needs self")
    found = _evidence(c)
    n = numel(list(found.result))
    return move(n, n, need_dtype(t, 0), "gather by index tensors", other=found.index_bytes)


def _index_put(s: list[Shape], t: list[str], c: list[Any]) -> Any:
    # index_put_ / _index_put_impl_(self!, Tensor?[] indices, values, accumulate[, unsafe]): values and the
    # index tensors read, the indexed elements of self written (and read, one add each, when accumulating)
    need(len(s) >= 3 and len(s[0]) >= 1, "index_put needs self and values")
    found = _evidence(c)
    n = numel(list(found.result))
    accumulate = arg(c, 3) is True
    return move(n, numel(s[2]) + (n if accumulate else 0), need_dtype(t, 0),
                "scatter-add by index tensors" if accumulate else "scatter by index tensors",
                other=found.index_bytes, flops=1.0 if accumulate else 0.0)


def _masked_index_put_accumulate(s: list[Shape], t: list[str], c: list[Any]) -> Any:
    # _unsafe_masked_index_put_accumulate(self, mask, Tensor?[] indices, values): Inductor's decomposition of
    # embedding_dense_backward (torch/_decomp/decompositions.py): each value added into self at its index
    # where the mask holds (the index tensors' shapes and dtype as the FX graph gives them; a profiler's
    # trace records neither for a tensor list)
    need(len(s) >= 4 and len(s[0]) >= 1 and bool(s[3]), "needs self, mask, indices and values")
    indices = _tensor_list(s, 2)
    index_dtype = TORCH_DTYPES.get(str(t[2])) if len(t) > 2 else None
    if index_dtype is None:
        raise Unrecorded(INDICES_UNRECORDED)
    n = numel(s[3])
    other = sum(numel(x) for x in indices) * dtype_bytes(index_dtype) + numel(s[1]) * dtype_bytes("int8")
    return move(n, numel(s[3]) + n, need_dtype(t, 0), "masked scatter-add by index tensors", other=other,
                flops=1.0)


def _scatter_into(s: list[Shape], t: list[str], c: list[Any]) -> Any:
    # select_scatter / slice_scatter(self, src, dim, …): a copy of self with src written into a slice of it
    # (the backward of select, unbind and slice in a compiled graph): self's other elements and src read,
    # the whole output written
    need(len(s) >= 2 and len(s[0]) >= 1 and dtype_of(t, 0) is not None, "needs self and src")
    n = numel(s[0])
    return move(n, n, need_dtype(t, 0), "copy with a slice replaced")


def _to_copy(s: list[Shape], t: list[str], c: list[Any]) -> Any:
    # _to_copy(self, dtype, layout, device, pin_memory, non_blocking, memory_format): read at self's dtype,
    # write at the target dtype (c10::ScalarType code; none = self's)
    need(len(s) >= 1 and dtype_of(t, 0) is not None, "needs the input")
    src = need_dtype(t, 0)
    if len(c) < 2:
        raise Unrecorded("_to_copy dtype not recorded")
    code = arg(c, 1)
    dst = {4: "int64", 3: "int32", 11: "int8", 1: "int8", 0: "int8"}.get(code, SCALAR_TYPES.get(code, src)) \
        if isinstance(code, int) else src
    n = numel(s[0])
    need(n > 0, "an empty tensor")
    return move(n, n if dst == src else 0, dst, f"convert {src} -> {dst}",
                other=0 if dst == src else n * dtype_bytes(src))


register_reader(("cat", "stack", "_cat", "concat", "concatenate", "hstack", "vstack"), _cat)
register_reader(("pad", "constant_pad_nd", "reflection_pad1d", "reflection_pad2d", "reflection_pad3d",
                 "replication_pad1d", "replication_pad2d", "replication_pad3d"), _pad)
register_reader(("repeat",), _repeat)
register_reader(("slice_backward", "select_backward"), _grad_to_size(1))
register_reader(("index_select",), _index_select)
register_reader(("gather",), _gather)
register_reader(("scatter",), _scatter(False, 3, 2))
register_reader(("scatter_add",), _scatter(True, 3, 2))
register_reader(("index_add",), _scatter(True, 3, 2))
register_reader(("index",), _index)
register_reader(("index_put", "_index_put_impl", "_index_put_impl_"), _index_put)
register_reader(("_unsafe_masked_index_put_accumulate",), _masked_index_put_accumulate)
register_reader(("select_scatter", "slice_scatter"), _scatter_into)
register_reader(("zeros", "ones", "full"), _fill(0, 1))
register_reader(("zeros_like", "ones_like", "full_like"), _fill(None, None))
register_reader(("arange",), _arange)
register_reader(("_to_copy",), _to_copy)
