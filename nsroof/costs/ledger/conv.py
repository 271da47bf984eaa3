"""2-D convolution, forward (conv2d: direct convolution, NCHW, square kernel) and backward (conv2d-backward:
the input and weight gradients are two convolutions of the forward's size, as torch/utils/flop_counter.py
counts them for groups = 1; the bias gradient Σ dY).

Sources: the ledger's accounting convention (nsroof.costs.ledger.core) applied to the convolution's algebra.
"""

from __future__ import annotations

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
