"""aten shape readers of data movement (cat, stack, pad, repeat, resize, gather/scatter, index_select, the
view backwards), sorting and counting, group / instance / vector norms, losses and embedding_bag. Pure data
movement is a pointwise op of 0 FLOP: its inputs read once, its output written once."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from nsroof.costs.ledger.aten_args import (
    FLOATING,
    TORCH_DTYPES,
    NoShape,
    Shape,
    Unrecorded,
    arg,
    concrete_values,
    dtype_of,
    ledger_op,
    need,
    need_dtype,
    numel,
    recorded,
    register_reader,
)
from nsroof.costs.ledger.core import Cost, Term, dtype_bytes

INDICES_UNRECORDED = "the index tensors (a list of optional tensors) are not recorded by torch.profiler"


def _move(n: int, reads: int, dt: str, what: str, other: float = 0.0, flops: float = 0.0) -> Any:
    return ledger_op("pointwise", n=max(n, 1), read_elements=reads, flops_per_element=flops, dtype=dt, op=what,
                     other_read_bytes=other)


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
    return _move(n, n, dt or "fp32", "copy into the output")


def _pad(s: list[Shape], t: list[str], c: list[Any]) -> Any:
    # pad / constant_pad_nd / reflection_pad*d / replication_pad*d(input, pad, …): pads from the last dim
    need(len(s) >= 1 and len(s[0]) >= 1, "pad needs the input shape")
    pads = recorded(c, 1, "pad sizes not recorded")
    need(isinstance(pads, list) and len(pads) % 2 == 0, f"pad {pads!r} is not pairs of sizes")
    out = list(s[0])
    for i in range(len(pads) // 2):
        out[-1 - i] += pads[2 * i] + pads[2 * i + 1]
    return _move(numel(out), numel(s[0]), need_dtype(t, 0), "copy + fill the border")


def _repeat(s: list[Shape], t: list[str], c: list[Any]) -> Any:
    reps = recorded(c, 1, "repeat counts not recorded")
    need(isinstance(reps, list) and len(s) >= 1, "repeat needs the input and its counts")
    return _move(numel(s[0]) * numel(reps), numel(s[0]), need_dtype(t, 0), "tiled copy")


def _grad_to_size(size_at: int) -> Any:
    """slice_backward / select_backward / narrow…(grad, input_sizes, dim, …): a zeroed input-sized gradient
    with grad copied into its window."""

    def read(s: list[Shape], t: list[str], c: list[Any]) -> Any:
        size = recorded(c, size_at, "input sizes not recorded")
        need(isinstance(size, list) and len(s) >= 1, "needs grad and the input sizes")
        return _move(numel(size), numel(s[0]), need_dtype(t, 0), "zero fill + copy of the window")

    return read


_UPSAMPLE = {"nearest": "nearest", "_nearest_exact": "nearest-exact", "linear": "linear", "bilinear": "bilinear",
             "trilinear": "trilinear", "bicubic": "bicubic"}


def _upsample(mode: str, dims: int, backward: bool) -> Any:
    """upsample_<mode><d>d(input, output_size, [align_corners,] scales…) (the .vec overload: output_size or
    scale_factors); backward(grad_output, output_size, input_size, …)."""

    def read(s: list[Shape], t: list[str], c: list[Any]) -> Any:
        need(len(s) >= 1 and len(s[0]) == dims + 2, f"upsample {dims}-D needs an (N, C, {dims} spatial) tensor")
        x = s[0]
        planes = x[0] * x[1]
        if backward:
            size = recorded(c, 2, "upsample input_size not recorded")
            need(isinstance(size, list) and len(size) == dims + 2, f"input_size {size!r}")
            return ledger_op("upsample", planes=planes, inputs=numel(size[2:]), outputs=numel(x[2:]), mode=mode,
                             dtype=need_dtype(t, 0), backward=True)
        size = arg(c, 1)
        if not isinstance(size, list) or not size:
            scales = next((v for v in c[2:] if isinstance(v, list) and v), None)
            if scales is None:
                raise Unrecorded("upsample output size / scale factors not recorded")
            size = [math.floor(n * f) for n, f in zip(x[2:], scales, strict=False)]
        need(len(size) == dims, f"output size {size!r} is not {dims}-D")
        return ledger_op("upsample", planes=planes, inputs=numel(x[2:]), outputs=numel(size), mode=mode,
                         dtype=need_dtype(t, 0))

    return read


def _index_select(s: list[Shape], t: list[str], c: list[Any]) -> Any:
    # index_select(self, dim, index): index.numel slices of self along dim
    need(len(s) >= 3 and len(s[0]) >= 1, "index_select needs self and index")
    dim = recorded(c, 1, "index_select dim not recorded")
    x = s[0]
    out = numel(s[2]) * numel(x) // max(x[dim % len(x)], 1)
    return _move(out, out, need_dtype(t, 0), "gather rows", other=numel(s[2]) * dtype_bytes(need_dtype(t, 2)))


def _gather(s: list[Shape], t: list[str], c: list[Any]) -> Any:
    # gather(self, dim, index, sparse_grad): one element of self per index element
    need(len(s) >= 3 and len(s[2]) >= 1, "gather needs the index")
    n = numel(s[2])
    return _move(n, n, need_dtype(t, 0), "gather", other=n * dtype_bytes(need_dtype(t, 2)))


def _scatter(accumulate: bool, src_at: int, index_at: int) -> Any:
    """scatter_(self!, dim, index, src) / scatter_add_ / index_add_(self!, dim, index, source, alpha):
    src and index read; the addressed elements of self written (and read when accumulating)."""

    def read(s: list[Shape], t: list[str], c: list[Any]) -> Any:
        need(len(s) > max(src_at, index_at) and len(s[src_at]) >= 1, "scatter needs index and src")
        n = numel(s[src_at])
        dt = need_dtype(t, 0)
        return _move(n, n * (2 if accumulate else 1), dt, "scatter-add" if accumulate else "scatter",
                     other=numel(s[index_at]) * dtype_bytes(need_dtype(t, index_at)), flops=1.0 if accumulate else 0.0)

    return read


def _sort(k_at: int | None, dim_at: int) -> Any:
    def read(s: list[Shape], t: list[str], c: list[Any]) -> Any:
        need(len(s) >= 1 and len(s[0]) >= 1, "sort needs the input shape")
        x = s[0]
        dim = recorded(c, dim_at, "sort dim not recorded")
        need(isinstance(dim, int), f"sort dim {dim!r}")
        cols = x[dim % len(x)]
        k = int(recorded(c, k_at, "top-k k not recorded")) if k_at is not None else 0
        return ledger_op("sort", rows=max(numel(x) // max(cols, 1), 1), cols=cols, k=k, dtype=need_dtype(t, 0))

    return read


def _cumsum(s: list[Shape], t: list[str], c: list[Any]) -> Any:
    need(len(s) >= 1 and len(s[0]) >= 1, "cumsum needs the input shape")
    n = numel(s[0])
    return _move(n, n, need_dtype(t, 0), "running sum", flops=1.0)


def _bincount(s: list[Shape], t: list[str], c: list[Any]) -> Any:
    # bincount(self, weights, minlength): the bin count max(x) + 1 is data; minlength bounds it from below
    need(len(s) >= 1 and len(s[0]) == 1, "bincount needs a 1-D input")
    bins = int(arg(c, 2, 0) or 0)
    need(bins > 0, "bincount's bin count (max(x) + 1) is data, and no minlength was given")
    n = s[0][0]
    op = ledger_op("reduction", n=max(n, 1), outputs=bins, dtype="int64", op="bincount (bins ≥ minlength)")
    return op


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
            from nsroof.costs.ledger.aten_seq import _SCALAR_TYPES

            dt = _SCALAR_TYPES.get(code, "fp32") if code is not None else "fp32"
            n = numel(size)
        need(n > 0, "an empty tensor")
        return _move(n, 0, dt, "fill")

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
    return _move(n, 0, "fp32" if floating else "int64", "write the range", flops=1.0)


def _group_norm(s: list[Shape], t: list[str], c: list[Any]) -> Any:
    # native_group_norm(input, weight, bias, N, C, HxW, group, eps): layernorm over each (sample, group)
    need(len(s) >= 1 and len(s[0]) >= 2, "group_norm needs the input shape")
    n, ch, hw, groups = (int(recorded(c, i, "group_norm sizes not recorded")) for i in (3, 4, 5, 6))
    dt = need_dtype(t, 0)
    op = ledger_op("layernorm", rows=n * groups, hidden=ch // groups * hw, dtype=dt, affine=False)
    affine = len(s) > 2 and len(s[1]) == 1
    extra = Cost((Term("read γ, β", bytes=2 * ch * dtype_bytes(dt)), Term("γ·x̂ + β", flops=2.0 * n * ch * hw)))
    from dataclasses import replace

    return replace(op, formula="groupnorm", cost=op.cost + extra if affine else op.cost,
                   shape={"rows": n * groups, "hidden": ch // groups * hw, "groups": groups})


def _group_norm_backward(s: list[Shape], t: list[str], c: list[Any]) -> Any:
    # native_group_norm_backward(grad_out, input, mean, rstd, weight, N, C, HxW, group, output_mask)
    n, ch, hw, groups = (int(recorded(c, i, "group_norm sizes not recorded")) for i in (5, 6, 7, 8))
    dt = need_dtype(t, 0)
    op = ledger_op("layernorm-backward", rows=n * groups, hidden=ch // groups * hw, dtype=dt, affine=False)
    extra = Cost((Term("read γ, write dγ, dβ", bytes=3 * ch * dtype_bytes(dt)), Term("dγ, dβ", flops=3.0 * n * ch * hw)))
    from dataclasses import replace

    return replace(op, formula="groupnorm-backward", cost=op.cost + extra)


def _instance_norm(s: list[Shape], t: list[str], c: list[Any]) -> Any:
    # instance_norm(input, weight, bias, running_mean, running_var, use_input_stats, momentum, eps, cudnn):
    # batch norm over N·C channels of one sample each
    need(len(s) >= 1 and len(s[0]) >= 3, "instance_norm needs an (N, C, …) input")
    x = s[0]
    training = bool(recorded(c, 5, "instance_norm use_input_stats not recorded"))
    return ledger_op("batchnorm", batch=1, channels=x[0] * x[1], spatial=numel(x[2:]), dtype=need_dtype(t, 0),
                     training=training, affine=len(s) > 1 and len(s[1]) == 1)


def _vector_norm(s: list[Shape], t: list[str], c: list[Any]) -> Any:
    # linalg_vector_norm(self, ord, dim, keepdim, dtype): |x|^ord summed (2 per element), then the root
    need(len(s) >= 1 and len(s[0]) >= 0, "vector_norm needs the input")
    x = s[0]
    dims = arg(c, 2)
    if dims is None and len(t) > 2 and t[2] == "ScalarList":
        raise Unrecorded("reduction dims not recorded")
    reduced = {d % len(x) for d in dims} if dims else set(range(len(x)))
    out = numel([n for i, n in enumerate(x) if i not in reduced]) if x else 1
    op = ledger_op("reduction", n=max(numel(x), 1), outputs=max(out, 1), dtype=need_dtype(t, 0),
                   divide_per_output=1.0, op="vector norm")
    from dataclasses import replace

    return replace(op, cost=op.cost + Cost((Term("|x|^ord", flops=1.0 * numel(x), note="1 per element"),)))


def _nll_loss(s: list[Shape], t: list[str], c: list[Any]) -> Any:
    # nll_loss_forward / nll_loss2d_forward(self, target, weight, reduction, ignore_index): one log-probability
    # gathered and negated-summed per target
    need(len(s) >= 2 and len(s[1]) >= 1, "nll_loss needs the target shape")
    n = numel(s[1])
    return _move(n, n, need_dtype(t, 0), "gather, negate, sum", other=n * dtype_bytes(need_dtype(t, 1)), flops=2.0)


def _nll_loss_backward(s: list[Shape], t: list[str], c: list[Any]) -> Any:
    # nll_loss_backward(grad_output, self, target, weight, reduction, ignore_index, total_weight): a zeroed
    # self-sized gradient with −grad at each target
    need(len(s) >= 3 and len(s[1]) >= 1, "needs self and target")
    return _move(numel(s[1]), 1, need_dtype(t, 1), "zero fill + scatter",
                 other=numel(s[2]) * dtype_bytes(need_dtype(t, 2)), flops=numel(s[2]) / max(numel(s[1]), 1))


def _mse(backward: bool) -> Any:
    """mse_loss(self, target, reduction): (x − y)² summed, 3 per element; backward(grad, self, target,
    reduction): 2·(x − y)·grad/n, 3 per element."""

    def read(s: list[Shape], t: list[str], c: list[Any]) -> Any:
        at = 1 if backward else 0
        need(len(s) > at + 1 and len(s[at]) >= 1, "mse_loss needs self and target")
        n = numel(s[at])
        dt = need_dtype(t, at)
        if backward:
            return _move(n, 2 * n + 1, dt, "2·(x − y)·grad/n", flops=3.0)
        op = ledger_op("reduction", n=n, outputs=1, dtype=dt, divide_per_output=1.0, op="mse")
        from dataclasses import replace

        return replace(op, cost=op.cost + Cost((Term("read target", bytes=n * dtype_bytes(dt)),
                                                Term("subtract, square", flops=2.0 * n))))

    return read


def _embedding_bag(s: list[Shape], t: list[str], c: list[Any]) -> Any:
    # _embedding_bag(weight, indices, offsets, scale_grad_by_freq, mode, sparse, per_sample_weights, …):
    # one table row gathered and summed per index, one row written per bag
    need(len(s) >= 3 and len(s[0]) == 2 and len(s[1]) >= 1 and len(s[2]) == 1, "needs weight, indices, offsets")
    hidden, indices, bags = s[0][1], numel(s[1]), s[2][0]
    dt = need_dtype(t, 0)
    return _move(bags * hidden, indices * hidden, dt, "gather + sum per bag", flops=indices / max(bags, 1),
                 other=(indices + bags) * dtype_bytes(need_dtype(t, 1)))


@dataclass(frozen=True)
class IndexEvidence:
    """What an aten::index / index_put_ call's own child ops say about the index tensors torch.profiler does
    not record (index_evidence): the indexed elements' shape and each index tensor's shape and dtype. The
    attribution passes it as the call's `indices` argument."""

    result: tuple[int, ...]
    indices: tuple[tuple[tuple[int, ...], str], ...]

    @property
    def index_bytes(self) -> float:
        return float(sum(numel(list(shape)) * dtype_bytes(TORCH_DTYPES.get(dt, "int64")) for shape, dt in self.indices))


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
    # index(self, Tensor?[] indices): the indexed elements of self read and written out, each index tensor read
    need(len(s) >= 1 and len(s[0]) >= 1, "index needs self")
    found = _evidence(c)
    n = numel(list(found.result))
    return _move(n, n, need_dtype(t, 0), "gather by index tensors", other=found.index_bytes)


def _index_put(s: list[Shape], t: list[str], c: list[Any]) -> Any:
    # index_put_ / _index_put_impl_(self!, Tensor?[] indices, values, accumulate[, unsafe]): values and the index
    # tensors read, the indexed elements of self written (and read, one add each, when accumulating)
    need(len(s) >= 3 and len(s[0]) >= 1, "index_put needs self and values")
    found = _evidence(c)
    n = numel(list(found.result))
    accumulate = arg(c, 3) is True
    return _move(n, numel(s[2]) + (n if accumulate else 0), need_dtype(t, 0),
                 "scatter-add by index tensors" if accumulate else "scatter by index tensors",
                 other=found.index_bytes, flops=1.0 if accumulate else 0.0)


register_reader(("cat", "stack", "_cat", "concat", "concatenate", "hstack", "vstack"), _cat)
register_reader(("pad", "constant_pad_nd", "reflection_pad1d", "reflection_pad2d", "reflection_pad3d",
                 "replication_pad1d", "replication_pad2d", "replication_pad3d"), _pad)
register_reader(("repeat",), _repeat)
register_reader(("slice_backward", "select_backward"), _grad_to_size(1))
for _name, _mode in _UPSAMPLE.items():
    for _d, _suffix in ((1, "1d"), (2, "2d"), (3, "3d")):
        _op = f"upsample_{_name}{_suffix}" if not _name.startswith("_") else f"_upsample{_name}{_suffix}"
        if _mode in ("linear",) and _d != 1 or _mode in ("bilinear", "bicubic") and _d != 2 or \
                _mode == "trilinear" and _d != 3:
            continue
        register_reader((_op,), _upsample(_mode, _d, False))
        register_reader((_op + "_backward",), _upsample(_mode, _d, True))
register_reader(("index_select",), _index_select)
register_reader(("gather",), _gather)
register_reader(("scatter",), _scatter(False, 3, 2))
register_reader(("scatter_add",), _scatter(True, 3, 2))
register_reader(("index_add",), _scatter(True, 3, 2))
register_reader(("index",), _index)
register_reader(("index_put", "_index_put_impl", "_index_put_impl_"), _index_put)
register_reader(("sort", "argsort"), _sort(None, 1))
register_reader(("topk",), _sort(1, 2))
register_reader(("cumsum",), _cumsum)
register_reader(("bincount",), _bincount)
register_reader(("zeros", "ones", "full"), _fill(0, 1))
register_reader(("zeros_like", "ones_like", "full_like"), _fill(None, None))
register_reader(("arange",), _arange)
register_reader(("native_group_norm",), _group_norm)
register_reader(("native_group_norm_backward",), _group_norm_backward)
register_reader(("instance_norm",), _instance_norm)
register_reader(("linalg_vector_norm",), _vector_norm)
register_reader(("nll_loss_forward", "nll_loss2d_forward", "nll_loss", "nll_loss_nd"), _nll_loss)
register_reader(("nll_loss_backward", "nll_loss2d_backward"), _nll_loss_backward)
register_reader(("mse_loss",), _mse(False))
register_reader(("mse_loss_backward",), _mse(True))
register_reader(("_embedding_bag", "embedding_bag", "_embedding_bag_forward_only"), _embedding_bag)
_ = (FLOATING, NoShape)


def _to_copy(s: list[Shape], t: list[str], c: list[Any]) -> Any:
    # _to_copy(self, dtype, layout, device, pin_memory, non_blocking, memory_format): read at self's dtype,
    # write at the target dtype (c10::ScalarType code; none = self's)
    from nsroof.costs.ledger.aten_seq import _SCALAR_TYPES

    need(len(s) >= 1 and dtype_of(t, 0) is not None, "needs the input")
    src = need_dtype(t, 0)
    if len(c) < 2:
        raise Unrecorded("_to_copy dtype not recorded")
    code = arg(c, 1)
    dst = {4: "int64", 3: "int32", 11: "int8", 1: "int8", 0: "int8"}.get(code, _SCALAR_TYPES.get(code, src)) \
        if isinstance(code, int) else src
    n = numel(s[0])
    need(n > 0, "an empty tensor")
    return _move(n, n if dst == src else 0, dst, f"convert {src} -> {dst}", other=0 if dst == src else n * dtype_bytes(src))


register_reader(("_to_copy",), _to_copy)
