"""aten readers of resampling (formulas: nsroof.costs.ledger.resample): interpolation (upsample_*, forward
and backward), 2-D max and average pooling (forward and backward) and adaptive average pooling."""

from __future__ import annotations

import math
from typing import Any

from nsroof.costs.ledger.aten.args import (
    Reader,
    Shape,
    Unrecorded,
    arg,
    ledger_op,
    need,
    need_dtype,
    numel,
    recorded,
    register_reader,
    square,
)


def _pool(mode: str, indices: bool) -> Reader:
    """max_pool2d[_with_indices](input, kernel_size, stride, padding, dilation, ceil_mode);
    avg_pool2d(input, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override)."""

    def read(s: list[Shape], t: list[str], c: list[Any]) -> Any:
        need(len(s) >= 1 and len(s[0]) == 4, "only batched 2-D pooling (a 4-D input) has a formula")
        what = "pool kernel/stride/padding not recorded"
        kernel = square(recorded(c, 1, what), "kernel_size")
        stride_value = recorded(c, 2, what)
        # an empty stride list is torch's "same as the kernel"
        stride = kernel if stride_value in ([], ()) else square(stride_value, "stride")
        padding = square(recorded(c, 3, what), "padding")
        dilation = square(recorded(c, 4, what), "dilation") if mode == "max" else 1
        ceil_mode = recorded(c, 5 if mode == "max" else 4, what)
        n, ch, h, w = s[0]
        return ledger_op("pool2d", batch=n, channels=ch, height=h, width=w, kernel_size=kernel, stride=stride,
                         padding=padding, dilation=dilation, ceil_mode=bool(ceil_mode), mode=mode,
                         dtype=need_dtype(t, 0), indices=indices)

    return read


def _pool_backward(mode: str) -> Reader:
    """max_pool2d_with_indices_backward(grad_output, input, kernel_size, …, indices) and
    avg_pool2d_backward(grad_output, input, kernel_size, …): dY's shape is the output size."""

    def read(s: list[Shape], t: list[str], c: list[Any]) -> Any:
        need(len(s) >= 2 and len(s[0]) == 4 and len(s[1]) == 4,
             "only batched 2-D pooling (4-D dY and input) has a formula")
        kernel = square(recorded(c, 2, "pool kernel/stride/padding not recorded"), "kernel_size")
        n, ch, h, w = s[1]
        return ledger_op("pool2d-backward", batch=n, channels=ch, height=h, width=w, out_height=s[0][2],
                         out_width=s[0][3], kernel_size=kernel, mode=mode, dtype=need_dtype(t, 0))

    return read


def _adaptive_avg_pool(s: list[Shape], t: list[str], c: list[Any]) -> Any:
    # _adaptive_avg_pool2d(input, output_size): with sizes that divide the input, disjoint windows, i.e. a
    # mean over each window (global average pooling is output_size [1, 1])
    need(len(s) >= 1 and len(s[0]) == 4, "only batched 2-D pooling (a 4-D input) has a formula")
    size = recorded(c, 1, "adaptive pool output_size not recorded")
    need(isinstance(size, list | tuple) and len(size) == 2
         and all(isinstance(v, int) and v > 0 for v in size),
         f"output_size {size!r} is not two positive integers")
    n, ch, h, w = s[0]
    need(h % size[0] == 0 and w % size[1] == 0,
         f"output {size} does not divide the {h}×{w} input (overlapping windows)")
    return ledger_op("reduction", n=max(numel(s[0]), 1), outputs=n * ch * size[0] * size[1],
                     dtype=need_dtype(t, 0), divide_per_output=1.0, op="adaptive_avg_pool2d")


_UPSAMPLE = {"nearest": "nearest", "_nearest_exact": "nearest-exact", "linear": "linear",
             "bilinear": "bilinear", "trilinear": "trilinear", "bicubic": "bicubic"}


def _upsample(mode: str, dims: int, backward: bool) -> Any:
    """upsample_<mode><d>d(input, output_size, [align_corners,] scales…) (the .vec overload: output_size or
    scale_factors); backward(grad_output, output_size, input_size, …)."""

    def read(s: list[Shape], t: list[str], c: list[Any]) -> Any:
        need(len(s) >= 1 and len(s[0]) == dims + 2,
             f"upsample {dims}-D needs an (N, C, {dims} spatial) tensor")
        x = s[0]
        planes = x[0] * x[1]
        if backward:
            size = recorded(c, 2, "upsample input_size not recorded")
            need(isinstance(size, list) and len(size) == dims + 2, f"input_size {size!r}")
            return ledger_op("upsample", planes=planes, inputs=numel(size[2:]), outputs=numel(x[2:]),
                             mode=mode, dtype=need_dtype(t, 0), backward=True)
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


register_reader(("max_pool2d",), _pool("max", False))
register_reader(("max_pool2d_with_indices",), _pool("max", True))
register_reader(("avg_pool2d",), _pool("avg", False))
register_reader(("max_pool2d_with_indices_backward",), _pool_backward("max"))
register_reader(("avg_pool2d_backward",), _pool_backward("avg"))
register_reader(("adaptive_avg_pool2d", "_adaptive_avg_pool2d"), _adaptive_avg_pool)
for _name, _mode in _UPSAMPLE.items():
    for _d, _suffix in ((1, "1d"), (2, "2d"), (3, "3d")):
        _op = f"upsample_{_name}{_suffix}" if not _name.startswith("_") else f"_upsample{_name}{_suffix}"
        if _mode in ("linear",) and _d != 1 or _mode in ("bilinear", "bicubic") and _d != 2 or \
                _mode == "trilinear" and _d != 3:
            continue
        register_reader((_op,), _upsample(_mode, _d, False))
        register_reader((_op + "_backward",), _upsample(_mode, _d, True))
