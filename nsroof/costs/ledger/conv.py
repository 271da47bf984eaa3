"""Convolutions. 2-D, forward (conv2d: direct convolution, NCHW, square kernel) and backward (conv2d-backward:
the input and weight gradients are two convolutions of the forward's size, as torch/utils/flop_counter.py
counts them for groups = 1; the bias gradient Σ dY).

convolution / convolution-backward: the same for 1-, 2- and 3-D, per-axis kernel, stride, padding and
dilation, groups and transposed convolutions (a square 2-D one gives conv2d's numbers).

Sources: the ledger's accounting convention (nsroof.costs.ledger.core) applied to the convolution's algebra.
"""

from __future__ import annotations

import math

from nsroof.costs.ledger.core import (
    SRC_CNN,
    SRC_LEDGER,
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


@register("conv2d", source=SRC_LEDGER)
def conv2d(
    batch: int,
    in_channels: int,
    height: int,
    width: int,
    out_channels: int,
    kernel_size: int,
    stride: int = 1,
    padding: int = 0,
    dilation: int = 1,
    groups: int = 1,
    dtype: str = "fp16",
    bias: bool = False,
) -> Operator:
    """Direct 2-D convolution (square kernel, stride, padding, dilation), NCHW; minimum traffic."""
    positive("conv2d", batch=batch, in_channels=in_channels, height=height, width=width,
             out_channels=out_channels, kernel_size=kernel_size, stride=stride, dilation=dilation,
             groups=groups)
    non_negative("conv2d", padding=padding)
    if in_channels % groups or out_channels % groups:
        raise LedgerError(f"conv2d: groups={groups} must divide in_channels={in_channels} and "
                          f"out_channels={out_channels}")
    dt = canonical_dtype(dtype)
    b = dtype_bytes(dt)
    span = dilation * (kernel_size - 1) + 1  # receptive field of one output along an axis
    out_h = (height + 2 * padding - span) // stride + 1
    out_w = (width + 2 * padding - span) // stride + 1
    if out_h <= 0 or out_w <= 0:
        raise LedgerError(f"conv2d: a {kernel_size}×{kernel_size} kernel (dilation {dilation}) does not fit "
                          f"a {height}×{width} input with padding {padding}")
    macs_per_output = (in_channels // groups) * kernel_size * kernel_size
    outputs = batch * out_channels * out_h * out_w
    items = [
        Term("read input", bytes=nbytes(batch * in_channels * height * width, dt), note=f"N·C·H·W·{b:g} B"),
        Term("read weights", bytes=nbytes(out_channels * (in_channels // groups) * kernel_size**2, dt),
             note=f"K·(C/groups)·R·S·{b:g} B"),
        Term("write output", bytes=nbytes(outputs, dt), note=f"N·K·P·Q·{b:g} B, P×Q = {out_h}×{out_w}"),
        Term("2·N·K·P·Q·(C/groups)·R·S", flops=2.0 * outputs * macs_per_output, note="multiply-add = 2 FLOP"),
    ]
    if bias:
        items.insert(3, Term("read bias", bytes=nbytes(out_channels, dt), note=f"K·{b:g} B"))
        items.append(Term("bias add", flops=1.0 * outputs, note="1 add per output"))
    shape = {"batch": batch, "in_channels": in_channels, "height": height, "width": width,
             "out_channels": out_channels, "kernel_size": kernel_size, "stride": stride, "padding": padding,
             "dilation": dilation, "groups": groups}
    return Operator("conv2d", shape, dt, Cost(tuple(items)), Roof("matmul", dt),
                    facts={"out_height": out_h, "out_width": out_w})


@register("conv2d-backward", source=SRC_CNN)
def conv2d_backward(
    batch: int,
    in_channels: int,
    height: int,
    width: int,
    out_channels: int,
    out_height: int,
    out_width: int,
    kernel_size: int,
    groups: int = 1,
    dtype: str = "fp16",
    input_grad: bool = True,
    weight_grad: bool = True,
    bias_grad: bool = False,
) -> Operator:
    """Convolution backward (aten::convolution_backward): dX = the transposed convolution of dY with W and
    dW = the correlation of X with dY, each 2·N·K·P·Q·(C/groups)·R·S FLOP like the forward; dB = Σ dY."""
    positive("conv2d-backward", batch=batch, in_channels=in_channels, height=height, width=width,
             out_channels=out_channels, out_height=out_height, out_width=out_width, kernel_size=kernel_size,
             groups=groups)
    if in_channels % groups or out_channels % groups:
        raise LedgerError(f"conv2d-backward: groups={groups} must divide in_channels={in_channels} and "
                          f"out_channels={out_channels}")
    if not (input_grad or weight_grad or bias_grad):
        raise LedgerError("conv2d-backward: no gradient asked for "
                          "(input_grad, weight_grad and bias_grad all off)")
    dt = canonical_dtype(dtype)
    b = dtype_bytes(dt)
    grad_out = batch * out_channels * out_height * out_width
    inputs = batch * in_channels * height * width
    weights = out_channels * (in_channels // groups) * kernel_size * kernel_size
    conv_flops = 2.0 * grad_out * (in_channels // groups) * kernel_size * kernel_size
    items = [Term("read dY", bytes=nbytes(grad_out, dt),
                  note=f"N·K·P·Q·{b:g} B, P×Q = {out_height}×{out_width}")]
    if input_grad:
        items += [
            Term("read W", bytes=nbytes(weights, dt), note=f"K·(C/groups)·R·S·{b:g} B"),
            Term("write dX", bytes=nbytes(inputs, dt), note=f"N·C·H·W·{b:g} B"),
            Term("dX = dY ⋆ W", flops=conv_flops, note="2·N·K·P·Q·(C/groups)·R·S"),
        ]
    if weight_grad:
        items += [
            Term("read X", bytes=nbytes(inputs, dt), note=f"N·C·H·W·{b:g} B"),
            Term("write dW", bytes=nbytes(weights, dt), note=f"K·(C/groups)·R·S·{b:g} B"),
            Term("dW = X ⋆ dY", flops=conv_flops, note="2·N·K·P·Q·(C/groups)·R·S"),
        ]
    if bias_grad:
        items += [
            Term("write dB", bytes=nbytes(out_channels, dt), note=f"K·{b:g} B"),
            Term("dB = Σ dY", flops=1.0 * grad_out, note="1 add per dY element"),
        ]
    shape = {"batch": batch, "in_channels": in_channels, "height": height, "width": width,
             "out_channels": out_channels, "out_height": out_height, "out_width": out_width,
             "kernel_size": kernel_size, "groups": groups} | (
        {} if input_grad else {"input_grad": False}) | ({} if weight_grad else {"weight_grad": False}) | (
        {"bias_grad": True} if bias_grad else {})
    return Operator("conv2d-backward", shape, dt, Cost(tuple(items)), Roof("matmul", dt))


def _sizes(text: str | int, dims: int, name: str, op: str) -> list[int]:
    """'3x1', '3,1' or '3' (every axis) → one integer per spatial axis (dims 0: as many as written)."""
    parts = [p for p in str(text).replace(",", "x").replace("×", "x").split("x") if p.strip()]
    try:
        values = [int(p) for p in parts]
    except ValueError:
        raise LedgerError(f"{op}: {name} {text!r} is not integers joined by 'x' (e.g. 3x1)") from None
    if len(values) == 1 and dims:
        values *= dims
    if not values or (dims and len(values) != dims):
        raise LedgerError(f"{op}: {name} {text!r} has {len(values)} axes, the input {dims}")
    return values


def _dims(sizes: list[int]) -> str:
    return "x".join(map(str, sizes))


def conv_out_sizes(op: str, size: list[int], kernel: list[int], stride: list[int], padding: list[int],
                   dilation: list[int], transposed: bool, output_padding: list[int]) -> list[int]:
    """Output size per axis: ⌊(in + 2·pad − dil·(k−1) − 1)/stride⌋ + 1, or for a transposed convolution
    (in − 1)·stride − 2·pad + dil·(k−1) + output_padding + 1 (torch.nn.ConvTranspose's shape rule)."""
    if transposed:
        out = [(i - 1) * s - 2 * p + d * (k - 1) + o + 1
               for i, k, s, p, d, o in zip(size, kernel, stride, padding, dilation, output_padding,
                                           strict=True)]
    else:
        out = [(i + 2 * p - d * (k - 1) - 1) // s + 1
               for i, k, s, p, d in zip(size, kernel, stride, padding, dilation, strict=True)]
    if min(out) <= 0:
        raise LedgerError(f"{op}: a {_dims(kernel)} kernel (dilation {_dims(dilation)}) does not fit a "
                          f"{_dims(size)} input with padding {_dims(padding)}")
    return out


def _channels(op: str, in_channels: int, out_channels: int, groups: int) -> None:
    if in_channels % groups or out_channels % groups:
        raise LedgerError(f"{op}: groups={groups} must divide in_channels={in_channels} and "
                          f"out_channels={out_channels}")


def conv_macs(batch: int, in_channels: int, out_channels: int, groups: int, kernel: list[int],
              size: list[int], out: list[int], transposed: bool) -> int:
    """Multiply-adds: each output point of a convolution takes (C/groups)·∏k of them; each input point of a
    transposed one scatters into (K/groups)·∏k outputs (torch.utils.flop_counter counts both so)."""
    taps = math.prod(kernel)
    if transposed:
        return batch * in_channels * math.prod(size) * (out_channels // groups) * taps
    return batch * out_channels * math.prod(out) * (in_channels // groups) * taps


@register("convolution", source=SRC_LEDGER)
def convolution(
    batch: int,
    in_channels: int,
    out_channels: int,
    size: str,
    kernel: str,
    stride: str = "1",
    padding: str = "0",
    dilation: str = "1",
    groups: int = 1,
    transposed: bool = False,
    output_padding: str = "0",
    dtype: str = "fp16",
    bias: bool = False,
) -> Operator:
    """Direct N-D convolution (1-, 2-, 3-D; per-axis kernel, stride, padding, dilation as 'AxB…'), groups,
    transposed; channels-first; minimum traffic."""
    positive("convolution", batch=batch, in_channels=in_channels, out_channels=out_channels, groups=groups)
    _channels("convolution", in_channels, out_channels, groups)
    dims = len(_sizes(size, 0, "size", "convolution"))
    sp = {name: _sizes(v, dims, name, "convolution") for name, v in (
        ("size", size), ("kernel", kernel), ("stride", stride), ("padding", padding), ("dilation", dilation),
        ("output_padding", output_padding))}
    positive("convolution", **{f"{n}[{i}]": v for n in ("size", "kernel", "stride", "dilation")
                               for i, v in enumerate(sp[n])})
    non_negative("convolution", **{f"{n}[{i}]": v for n in ("padding", "output_padding")
                                   for i, v in enumerate(sp[n])})
    out = conv_out_sizes("convolution", sp["size"], sp["kernel"], sp["stride"], sp["padding"], sp["dilation"],
                         transposed, sp["output_padding"])
    dt = canonical_dtype(dtype)
    b = dtype_bytes(dt)
    macs = conv_macs(batch, in_channels, out_channels, groups, sp["kernel"], sp["size"], out, transposed)
    outputs = batch * out_channels * math.prod(out)
    weights = in_channels * (out_channels // groups) * math.prod(sp["kernel"])
    count = "N·C·∏in·(K/groups)·∏k" if transposed else "N·K·∏out·(C/groups)·∏k"
    items = [
        Term("read input", bytes=nbytes(batch * in_channels * math.prod(sp["size"]), dt),
             note=f"N·C·∏in·{b:g} B, in = {_dims(sp['size'])}"),
        Term("read weights", bytes=nbytes(weights, dt), note=f"C·(K/groups)·∏k·{b:g} B"),
        Term("write output", bytes=nbytes(outputs, dt), note=f"N·K·∏out·{b:g} B, out = {_dims(out)}"),
        Term(f"2·{count}", flops=2.0 * macs, note="multiply-add = 2 FLOP"),
    ]
    if bias:
        items.insert(3, Term("read bias", bytes=nbytes(out_channels, dt), note=f"K·{b:g} B"))
        items.append(Term("bias add", flops=1.0 * outputs, note="1 add per output"))
    shape = {"batch": batch, "in_channels": in_channels, "out_channels": out_channels,
             "size": _dims(sp["size"]), "kernel": _dims(sp["kernel"]), "stride": _dims(sp["stride"]),
             "padding": _dims(sp["padding"]), "dilation": _dims(sp["dilation"]), "groups": groups} | (
        {"transposed": True, "output_padding": _dims(sp["output_padding"])} if transposed else {})
    return Operator("convolution", shape, dt, Cost(tuple(items)), Roof("matmul", dt),
                    facts={f"out_{axis}": o for axis, o in enumerate(out)})


@register("convolution-backward", source=SRC_CNN)
def convolution_backward(
    batch: int,
    in_channels: int,
    out_channels: int,
    size: str,
    out_size: str,
    kernel: str,
    groups: int = 1,
    transposed: bool = False,
    dtype: str = "fp16",
    input_grad: bool = True,
    weight_grad: bool = True,
    bias_grad: bool = False,
) -> Operator:
    """N-D convolution backward (aten::convolution_backward): dX and dW each cost the forward's multiply-adds
    (2·N·K·∏out·(C/groups)·∏k, transposed 2·N·C·∏in·(K/groups)·∏k); dB = Σ dY."""
    op = "convolution-backward"
    positive(op, batch=batch, in_channels=in_channels, out_channels=out_channels, groups=groups)
    _channels(op, in_channels, out_channels, groups)
    if not (input_grad or weight_grad or bias_grad):
        raise LedgerError(f"{op}: no gradient asked for (input_grad, weight_grad and bias_grad all off)")
    dims = len(_sizes(size, 0, "size", op))
    x, y, k = (_sizes(v, dims, n, op) for n, v in (("size", size), ("out_size", out_size),
                                                     ("kernel", kernel)))
    positive(op, **{f"{n}[{i}]": v for n, vs in (("size", x), ("out_size", y), ("kernel", k))
                    for i, v in enumerate(vs)})
    dt = canonical_dtype(dtype)
    b = dtype_bytes(dt)
    grad_out = batch * out_channels * math.prod(y)
    inputs = batch * in_channels * math.prod(x)
    weights = in_channels * (out_channels // groups) * math.prod(k)
    conv_flops = 2.0 * conv_macs(batch, in_channels, out_channels, groups, k, x, y, transposed)
    count = "2·N·C·∏in·(K/groups)·∏k" if transposed else "2·N·K·∏out·(C/groups)·∏k"
    items = [Term("read dY", bytes=nbytes(grad_out, dt), note=f"N·K·∏out·{b:g} B, out = {_dims(y)}")]
    if input_grad:
        items += [
            Term("read W", bytes=nbytes(weights, dt), note=f"C·(K/groups)·∏k·{b:g} B"),
            Term("write dX", bytes=nbytes(inputs, dt), note=f"N·C·∏in·{b:g} B"),
            Term("dX = dY ⋆ W", flops=conv_flops, note=count),
        ]
    if weight_grad:
        items += [
            Term("read X", bytes=nbytes(inputs, dt), note=f"N·C·∏in·{b:g} B"),
            Term("write dW", bytes=nbytes(weights, dt), note=f"C·(K/groups)·∏k·{b:g} B"),
            Term("dW = X ⋆ dY", flops=conv_flops, note=count),
        ]
    if bias_grad:
        items += [
            Term("write dB", bytes=nbytes(out_channels, dt), note=f"K·{b:g} B"),
            Term("dB = Σ dY", flops=1.0 * grad_out, note="1 add per dY element"),
        ]
    shape = {"batch": batch, "in_channels": in_channels, "out_channels": out_channels, "size": _dims(x),
             "out_size": _dims(y), "kernel": _dims(k), "groups": groups} | (
        {"transposed": True} if transposed else {}) | ({} if input_grad else {"input_grad": False}) | (
        {} if weight_grad else {"weight_grad": False}) | ({"bias_grad": True} if bias_grad else {})
    return Operator(op, shape, dt, Cost(tuple(items)), Roof("matmul", dt))
