"""Ledger formulas for the convolutional-network ops of a PyTorch training step that the core formulas do not
cover: convolution backward (input and weight gradients), batch norm forward and backward, and 2-D max /
average pooling forward and backward. Same convention as the core (nsroof.costs.ledger.core): inputs read
once, outputs written once, a basic op (add, multiply, compare, max) or a transcendental is 1 FLOP, a
multiply-add 2.

Sources: the ledger's accounting convention (nsroof.costs.ledger.core); the convolution backward is two
convolutions of the forward's size (torch/utils/flop_counter.py counts it the same way for groups = 1); batch
norm and pooling are counted from their definitions (the arithmetic is in each docstring).
"""

from __future__ import annotations

from nsroof.costs.ledger.core import (
    Cost,
    LedgerError,
    Operator,
    Roof,
    Term,
    canonical_dtype,
    dtype_bytes,
    nbytes,
)
from nsroof.costs.ledger.registry import register

SRC_CNN = "nsroof ops_cnn (ledger convention; counted from each op's definition)"


def _positive(formula: str, **values: float) -> None:
    for name, value in values.items():
        if not value > 0:
            raise LedgerError(f"{formula}: {name} must be > 0, got {value}")


def _simt(dt: str) -> Roof:
    return Roof("simt", "fp64" if dt == "fp64" else "fp32")


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
    _positive("conv2d-backward", batch=batch, in_channels=in_channels, height=height, width=width,
              out_channels=out_channels, out_height=out_height, out_width=out_width, kernel_size=kernel_size,
              groups=groups)
    if in_channels % groups or out_channels % groups:
        raise LedgerError(f"conv2d-backward: groups={groups} must divide in_channels={in_channels} and "
                          f"out_channels={out_channels}")
    if not (input_grad or weight_grad or bias_grad):
        raise LedgerError("conv2d-backward: no gradient asked for (input_grad, weight_grad and bias_grad all off)")
    dt = canonical_dtype(dtype)
    b = dtype_bytes(dt)
    grad_out = batch * out_channels * out_height * out_width
    inputs = batch * in_channels * height * width
    weights = out_channels * (in_channels // groups) * kernel_size * kernel_size
    conv_flops = 2.0 * grad_out * (in_channels // groups) * kernel_size * kernel_size
    items = [Term("read dY", bytes=nbytes(grad_out, dt), note=f"N·K·P·Q·{b:g} B, P×Q = {out_height}×{out_width}")]
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


@register("batchnorm", source=SRC_CNN)
def batchnorm(batch: int, channels: int, spatial: int, dtype: str = "fp32", training: bool = True,
              affine: bool = True) -> Operator:
    """Batch norm over N·spatial values per channel. Training: Σx (1) and Σx² (2) per element for the
    batch statistics, then y = (x − mean)·invstd (2) per element; affine adds ·γ + β (2). Per channel:
    mean, var = E[x²] − mean², invstd = rsqrt(var + eps) (5), and the running-stat updates (4, two
    multiply-adds each) are counted. Evaluation: the running statistics are read, not computed."""
    _positive("batchnorm", batch=batch, channels=channels, spatial=spatial)
    dt = canonical_dtype(dtype)
    b = dtype_bytes(dt)
    n = batch * channels * spatial
    per_element = 2 + (3 if training else 0) + (2 if affine else 0)
    items = [
        Term("read x", bytes=nbytes(n, dt), note=f"N·C·spatial·{b:g} B"),
        Term("write y", bytes=nbytes(n, dt), note=f"N·C·spatial·{b:g} B"),
        Term("normalize", flops=float(per_element) * n,
             note=f"{per_element} per element: " + ", ".join(
                 (["Σx, Σx² (3)"] if training else []) + ["(x − mean)·invstd (2)"] + (["·γ + β (2)"] if affine else []))),
    ]
    # running mean and var: read in evaluation; read and written back in training
    stat_vectors = 4 if training else 2
    items.append(Term("running mean, var", bytes=stat_vectors * nbytes(channels, dt),
                      note=f"{'read + write' if training else 'read'} 2 C-vectors·{b:g} B"))
    if training:
        items += [
            Term("write saved mean, invstd", bytes=2 * nbytes(channels, "fp32"), note="2·C·4 B"),
            Term("per-channel statistics", flops=9.0 * channels, note="mean, var, rsqrt (5) + running updates (4)"),
        ]
    if affine:
        items.append(Term("read γ, β", bytes=2 * nbytes(channels, dt), note=f"2·C·{b:g} B"))
    shape = {"batch": batch, "channels": channels, "spatial": spatial} | (
        {} if training else {"training": False}) | ({} if affine else {"affine": False})
    return Operator("batchnorm", shape, dt, Cost(tuple(items)), _simt(dt))


@register("batchnorm-backward", source=SRC_CNN)
def batchnorm_backward(batch: int, channels: int, spatial: int, dtype: str = "fp32", training: bool = True,
                       input_grad: bool = True, affine_grad: bool = True) -> Operator:
    """Batch norm backward from the saved mean and invstd: x̂ = (x − mean)·invstd (2), Σdy (1) and Σdy·x̂ (2)
    per element give dβ and dγ; training: dx = γ·invstd·(dy − mean(dy) − x̂·mean(dy·x̂)) (4 per element);
    evaluation: dx = dy·(γ·invstd) (1 per element, the statistics being constants)."""
    _positive("batchnorm-backward", batch=batch, channels=channels, spatial=spatial)
    if not (input_grad or affine_grad):
        raise LedgerError("batchnorm-backward: no gradient asked for (input_grad and affine_grad both off)")
    dt = canonical_dtype(dtype)
    b = dtype_bytes(dt)
    n = batch * channels * spatial
    # the sums are needed for dγ, dβ, and in training for dx too
    sums = affine_grad or training
    items = [
        Term("read dy", bytes=nbytes(n, dt), note=f"N·C·spatial·{b:g} B"),
        Term("read saved mean, invstd", bytes=2 * nbytes(channels, "fp32"), note="2·C·4 B"),
    ]
    if sums:
        items += [
            Term("read x", bytes=nbytes(n, dt), note=f"N·C·spatial·{b:g} B"),
            Term("x̂, Σdy, Σdy·x̂", flops=5.0 * n, note="5 per element"),
        ]
    if input_grad:
        items += [
            Term("read γ", bytes=nbytes(channels, dt), note=f"C·{b:g} B"),
            Term("write dx", bytes=nbytes(n, dt), note=f"N·C·spatial·{b:g} B"),
            Term("dx", flops=(4.0 if training else 1.0) * n, note=f"{4 if training else 1} per element"),
        ]
    if affine_grad:
        items.append(Term("write dγ, dβ", bytes=2 * nbytes(channels, dt), note=f"2·C·{b:g} B"))
    shape = {"batch": batch, "channels": channels, "spatial": spatial} | ({} if training else {"training": False}) | (
        {} if input_grad else {"input_grad": False}) | ({} if affine_grad else {"affine_grad": False})
    return Operator("batchnorm-backward", shape, dt, Cost(tuple(items)), _simt(dt))


def pool_out(size: int, kernel: int, stride: int, padding: int, dilation: int, ceil_mode: bool) -> int:
    """Output length of a pooling window along one axis, as torch computes it: ⌊ or ⌈(L + 2p − d(k − 1) − 1)/s⌉
    + 1, and in ceil mode the last window must start inside the input or its left padding."""
    span = size + 2 * padding - dilation * (kernel - 1) - 1
    out = (-(-span // stride) if ceil_mode else span // stride) + 1
    if ceil_mode and (out - 1) * stride >= size + padding:
        out -= 1
    return out


@register("pool2d", source=SRC_CNN)
def pool2d(batch: int, channels: int, height: int, width: int, kernel_size: int, stride: int = 0, padding: int = 0,
           dilation: int = 1, ceil_mode: bool = False, mode: str = "max", dtype: str = "fp32",
           indices: bool = False) -> Operator:
    """2-D max or average pooling (stride 0 = the kernel size, torch's default): max takes R·S − 1 compares
    per output, average R·S − 1 adds and 1 divide; max_pool2d_with_indices also writes an int64 index per
    output."""
    stride = stride or kernel_size
    _positive("pool2d", batch=batch, channels=channels, height=height, width=width, kernel_size=kernel_size,
              stride=stride, dilation=dilation)
    if padding < 0:
        raise LedgerError(f"pool2d: padding must be >= 0, got {padding}")
    if mode not in ("max", "avg"):
        raise LedgerError(f"pool2d: mode must be max or avg, got {mode!r}")
    dt = canonical_dtype(dtype)
    b = dtype_bytes(dt)
    out_h = pool_out(height, kernel_size, stride, padding, dilation, ceil_mode)
    out_w = pool_out(width, kernel_size, stride, padding, dilation, ceil_mode)
    if out_h <= 0 or out_w <= 0:
        raise LedgerError(f"pool2d: a {kernel_size}×{kernel_size} window does not fit a {height}×{width} input")
    outputs = batch * channels * out_h * out_w
    window = kernel_size * kernel_size
    per_output = window - 1 + (1 if mode == "avg" else 0)
    items = [
        Term("read input", bytes=nbytes(batch * channels * height * width, dt), note=f"N·C·H·W·{b:g} B"),
        Term("write output", bytes=nbytes(outputs, dt), note=f"N·C·P·Q·{b:g} B, P×Q = {out_h}×{out_w}"),
        Term(f"{mode} over the window", flops=float(per_output) * outputs,
             note=f"{per_output} per output ({'R·S − 1 compares' if mode == 'max' else 'R·S − 1 adds + 1 divide'})"),
    ]
    if indices:
        items.insert(2, Term("write indices", bytes=nbytes(outputs, "int64"), note="N·C·P·Q·8 B"))
    shape = {"batch": batch, "channels": channels, "height": height, "width": width, "kernel_size": kernel_size,
             "stride": stride, "padding": padding, "mode": mode} | ({"dilation": dilation} if dilation != 1 else {}) | (
        {"ceil_mode": True} if ceil_mode else {}) | ({"indices": True} if indices else {})
    return Operator("pool2d", shape, dt, Cost(tuple(items)), _simt(dt),
                    facts={"out_height": out_h, "out_width": out_w})


@register("pool2d-backward", source=SRC_CNN)
def pool2d_backward(batch: int, channels: int, height: int, width: int, out_height: int, out_width: int,
                    kernel_size: int, mode: str = "max", dtype: str = "fp32") -> Operator:
    """2-D pooling backward: dx zeroed, then each output gradient added back to its window. Max: read the
    saved int64 index, 1 add per output gradient; average: 1 divide and R·S adds per output gradient."""
    _positive("pool2d-backward", batch=batch, channels=channels, height=height, width=width, out_height=out_height,
              out_width=out_width, kernel_size=kernel_size)
    if mode not in ("max", "avg"):
        raise LedgerError(f"pool2d-backward: mode must be max or avg, got {mode!r}")
    dt = canonical_dtype(dtype)
    b = dtype_bytes(dt)
    outputs = batch * channels * out_height * out_width
    per_output = 1 if mode == "max" else 1 + kernel_size * kernel_size
    items = [
        Term("read dy", bytes=nbytes(outputs, dt), note=f"N·C·P·Q·{b:g} B"),
        Term("write dx", bytes=nbytes(batch * channels * height * width, dt), note=f"N·C·H·W·{b:g} B"),
        Term("scatter into the window", flops=float(per_output) * outputs,
             note=f"{per_output} per output gradient ({'1 add' if mode == 'max' else '1 divide + R·S adds'})"),
    ]
    if mode == "max":
        items.insert(1, Term("read indices", bytes=nbytes(outputs, "int64"), note="N·C·P·Q·8 B"))
    shape = {"batch": batch, "channels": channels, "height": height, "width": width, "out_height": out_height,
             "out_width": out_width, "kernel_size": kernel_size, "mode": mode}
    return Operator("pool2d-backward", shape, dt, Cost(tuple(items)), _simt(dt))
