"""aten readers of the reductions (formulas: nsroof.costs.ledger.reduction): sum and mean, softmax and
log-softmax with their backward, sort / argsort / top-k, cumsum, bincount, the vector norm, and the
losses (nll_loss, mse_loss, forward and backward)."""

from __future__ import annotations

from typing import Any

from nsroof.costs.ledger.aten.args import (
    Reader,
    Shape,
    Unrecorded,
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
from nsroof.costs.ledger.core import Cost, Term, dtype_bytes


def _reduction(kind: str) -> Reader:
    def read(s: list[Shape], t: list[str], c: list[Any]) -> Any:
        # sum/mean(input, dim=None, keepdim=False, dtype=None): one add per input element (+1 divide per
        # output for mean)
        need(len(s) >= 1 and dtype_of(t, 0) is not None, "reduction needs the input shape")
        shape = s[0]
        dims = arg(c, 1)
        # sum(input, dtype) has no dims; sum.dim_IntList(input, dim, …) records them as a ScalarList
        if dims is None and len(t) > 1 and t[1] == "ScalarList":
            raise Unrecorded("reduction dims not recorded")
        if isinstance(dims, int):
            dims = [dims]
        if not dims or not shape:
            out = 1
        else:
            reduced = {d % len(shape) for d in dims}
            out = numel([n for i, n in enumerate(shape) if i not in reduced])
        n = max(numel(shape), 1)
        per_output = 1.0 if kind == "mean" else 0.0
        return ledger_op("reduction", n=n, outputs=out, dtype=need_dtype(t, 0), divide_per_output=per_output,
                         op=kind)

    return read


def _var_mean(s: list[Shape], t: list[str], c: list[Any]) -> Any:
    # var_mean(input, dim, correction, keepdim): the mean (1 add per element) and the variance about it
    # (subtract, square, add per element: 4 in all); two outputs, each divided once (what Inductor's
    # decomposition of layer_norm leaves in a compiled graph)
    mean = _reduction("var_mean")(s, t, c)
    out = mean.shape["outputs"]
    return ledger_op("reduction", n=mean.shape["n"], outputs=2 * out, dtype=need_dtype(t, 0),
                     divide_per_output=1.0, op="var_mean", per_element=4.0)


def _softmax(s: list[Shape], t: list[str], c: list[Any]) -> Any:
    rows, cols = _softmax_rows(s, c, 0, 1)
    return ledger_op("softmax", rows=rows, cols=cols, dtype=need_dtype(t, 0))


def _softmax_backward(log: bool) -> Reader:
    def read(s: list[Shape], t: list[str], c: list[Any]) -> Any:
        # _softmax_backward_data(grad_output, output, dim, input_dtype)
        rows, cols = _softmax_rows(s, c, 0, 2)
        return ledger_op("softmax-backward", rows=rows, cols=cols, dtype=need_dtype(t, 0), log=log)

    return read


def _softmax_rows(s: list[Shape], c: list[Any], x_at: int, dim_at: int) -> tuple[int, int]:
    need(len(s) > x_at and len(s[x_at]) >= 1, "softmax needs the input shape")
    shape = s[x_at]
    dim = arg(c, dim_at)
    need(isinstance(dim, int), "softmax dim was not recorded")
    cols = shape[dim % len(shape)]
    return numel(shape) // cols, cols


def _sort(k_at: int | None, dim_at: int) -> Any:
    def read(s: list[Shape], t: list[str], c: list[Any]) -> Any:
        need(len(s) >= 1 and len(s[0]) >= 1, "sort needs the input shape")
        x = s[0]
        dim = recorded(c, dim_at, "sort dim not recorded")
        need(isinstance(dim, int), f"sort dim {dim!r}")
        cols = x[dim % len(x)]
        k = int(recorded(c, k_at, "top-k k not recorded")) if k_at is not None else 0
        return ledger_op("sort", rows=max(numel(x) // max(cols, 1), 1), cols=cols, k=k,
                         dtype=need_dtype(t, 0))

    return read


def _cumsum(s: list[Shape], t: list[str], c: list[Any]) -> Any:
    need(len(s) >= 1 and len(s[0]) >= 1, "cumsum needs the input shape")
    n = numel(s[0])
    return move(n, n, need_dtype(t, 0), "running sum", flops=1.0)


def _bincount(s: list[Shape], t: list[str], c: list[Any]) -> Any:
    # bincount(self, weights, minlength): the bin count max(x) + 1 is data; minlength bounds it from below
    need(len(s) >= 1 and len(s[0]) == 1, "bincount needs a 1-D input")
    bins = int(arg(c, 2, 0) or 0)
    need(bins > 0, "bincount's bin count (max(x) + 1) is data, and no minlength was given")
    n = s[0][0]
    op = ledger_op("reduction", n=max(n, 1), outputs=bins, dtype="int64", op="bincount (bins ≥ minlength)")
    return op


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
    # nll_loss_forward / nll_loss2d_forward(self, target, weight, reduction, ignore_index): one
    # log-probability gathered and negated-summed per target
    need(len(s) >= 2 and len(s[1]) >= 1, "nll_loss needs the target shape")
    n = numel(s[1])
    return move(n, n, need_dtype(t, 0), "gather, negate, sum", other=n * dtype_bytes(need_dtype(t, 1)),
                flops=2.0)


def _nll_loss_backward(s: list[Shape], t: list[str], c: list[Any]) -> Any:
    # nll_loss_backward(grad_output, self, target, weight, reduction, ignore_index, total_weight): a zeroed
    # self-sized gradient with −grad at each target
    need(len(s) >= 3 and len(s[1]) >= 1, "needs self and target")
    return move(numel(s[1]), 1, need_dtype(t, 1), "zero fill + scatter",
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
            return move(n, 2 * n + 1, dt, "2·(x − y)·grad/n", flops=3.0)
        op = ledger_op("reduction", n=n, outputs=1, dtype=dt, divide_per_output=1.0, op="mse")
        from dataclasses import replace

        return replace(op, cost=op.cost + Cost((Term("read target", bytes=n * dtype_bytes(dt)),
                                                Term("subtract, square", flops=2.0 * n))))

    return read


def _arg_reduction(kind: str) -> Reader:
    """argmax/argmin(input, dim=None, keepdim=False): one compare per input element, the indices written as
    int64."""
    values = _reduction(kind)

    def read(s: list[Shape], t: list[str], c: list[Any]) -> Any:
        from dataclasses import replace

        if arg(c, 1) is None and len(t) > 1 and t[1] == "Scalar":  # a dim was passed but not recorded
            raise Unrecorded(f"{kind} dim not recorded")
        op = values(s, t, c)
        outputs = int(op.shape["outputs"])
        terms = tuple(Term("write indices", bytes=8.0 * outputs, note="outputs·8 B (int64)")
                      if x.name == "write output" else x for x in op.cost.terms)
        return replace(op, cost=Cost(terms))

    return read


register_reader(("sum",), _reduction("sum"))
register_reader(("argmax",), _arg_reduction("argmax"))
register_reader(("argmin",), _arg_reduction("argmin"))
register_reader(("mean",), _reduction("mean"))
# amax/amin(input, dim, keepdim): one compare per input element, as the sum's one add (a softmax's row max,
# which Inductor's decomposition of log_softmax leaves in a compiled graph)
register_reader(("amax",), _reduction("amax"))
register_reader(("amin",), _reduction("amin"))
register_reader(("var_mean",), _var_mean)
register_reader(("softmax", "_softmax", "log_softmax", "_log_softmax"), _softmax)
register_reader(("_softmax_backward_data",), _softmax_backward(False))
register_reader(("_log_softmax_backward_data",), _softmax_backward(True))
register_reader(("sort", "argsort"), _sort(None, 1))
register_reader(("topk",), _sort(1, 2))
register_reader(("cumsum",), _cumsum)
register_reader(("bincount",), _bincount)
register_reader(("linalg_vector_norm",), _vector_norm)
register_reader(("nll_loss_forward", "nll_loss2d_forward", "nll_loss", "nll_loss_nd"), _nll_loss)
register_reader(("nll_loss_backward", "nll_loss2d_backward"), _nll_loss_backward)
register_reader(("mse_loss",), _mse(False))
register_reader(("mse_loss_backward",), _mse(True))
