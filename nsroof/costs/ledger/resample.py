"""Resampling, forward and backward: interpolation (upsample: F.interpolate's modes) and 2-D max / average
pooling (pool2d, pool2d-backward).

Sources: the ledger convention (nsroof.costs.ledger.core), counted from each op's definition (the
arithmetic is in each docstring).
"""

from __future__ import annotations

from nsroof.costs.ledger.core import (
    SRC_CNN,
    SRC_SEQ,
    Cost,
    LedgerError,
    Operator,
    Roof,
    Term,
    canonical_dtype,
    dtype_bytes,
    nbytes,
    positive,
    simt_roof,
)
from nsroof.costs.ledger.registry import register

_TAPS = {"nearest": 0, "nearest-exact": 0, "linear": 2, "bilinear": 4, "trilinear": 8, "bicubic": 16}


@register("upsample", source=SRC_SEQ)
def upsample(planes: int, inputs: int, outputs: int, mode: str = "bilinear", dtype: str = "fp32",
             backward: bool = False) -> Operator:
    """Resampling (F.interpolate) of `planes` (N·C) planes of `inputs` elements to `outputs`: each output a
    weighted sum of T taps (nearest 1 copy, linear 2, bilinear 4, trilinear 8, bicubic 16): T multiplies and
    T − 1 adds = 2T − 1 FLOP. Backward: each dy element scattered to its T taps, a multiply-add each (2T)."""
    if mode not in _TAPS:
        raise LedgerError(f"upsample: mode must be one of {', '.join(_TAPS)}, got {mode!r}")
    positive("upsample", planes=planes, inputs=inputs, outputs=outputs)
    dt = canonical_dtype(dtype)
    taps = _TAPS[mode]
    per = (2.0 * taps) if backward else max(2.0 * taps - 1, 0.0)
    small, big = (outputs, inputs) if backward else (inputs, outputs)
    items = (Term("read dy" if backward else "read x", bytes=nbytes(planes * small, dt)),
             Term("write dx" if backward else "write y", bytes=nbytes(planes * big, dt)),
             Term(f"{mode} weights", flops=per * planes * outputs,
                  note=f"{per:g} per output element ({taps} taps)"))
    shape = {"planes": planes, "inputs": inputs, "outputs": outputs, "mode": mode} | (
        {"backward": True} if backward else {})
    return Operator("upsample", shape, dt, Cost(items), Roof("simt", "fp64" if dt == "fp64" else "fp32"))


def pool_out(size: int, kernel: int, stride: int, padding: int, dilation: int, ceil_mode: bool) -> int:
    """Output length of a pooling window along one axis, as torch computes it:
    ⌊ or ⌈(L + 2p − d(k − 1) − 1)/s⌉ + 1, and in ceil mode the last window must start inside the input or
    its left padding."""
    span = size + 2 * padding - dilation * (kernel - 1) - 1
    out = (-(-span // stride) if ceil_mode else span // stride) + 1
    if ceil_mode and (out - 1) * stride >= size + padding:
        out -= 1
    return out


@register("pool2d", source=SRC_CNN)
def pool2d(batch: int, channels: int, height: int, width: int, kernel_size: int, stride: int = 0,
           padding: int = 0, dilation: int = 1, ceil_mode: bool = False, mode: str = "max",
           dtype: str = "fp32", indices: bool = False) -> Operator:
    """2-D max or average pooling (stride 0 = the kernel size, torch's default): max takes R·S − 1 compares
    per output, average R·S − 1 adds and 1 divide; max_pool2d_with_indices also writes an int64 index per
    output."""
    stride = stride or kernel_size
    positive("pool2d", batch=batch, channels=channels, height=height, width=width, kernel_size=kernel_size,
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
        raise LedgerError(f"pool2d: a {kernel_size}×{kernel_size} window does not fit a "
                          f"{height}×{width} input")
    outputs = batch * channels * out_h * out_w
    window = kernel_size * kernel_size
    per_output = window - 1 + (1 if mode == "avg" else 0)
    items = [
        Term("read input", bytes=nbytes(batch * channels * height * width, dt), note=f"N·C·H·W·{b:g} B"),
        Term("write output", bytes=nbytes(outputs, dt), note=f"N·C·P·Q·{b:g} B, P×Q = {out_h}×{out_w}"),
        Term(f"{mode} over the window", flops=float(per_output) * outputs,
             note=f"{per_output} per output "
                  f"({'R·S − 1 compares' if mode == 'max' else 'R·S − 1 adds + 1 divide'})"),
    ]
    if indices:
        items.insert(2, Term("write indices", bytes=nbytes(outputs, "int64"), note="N·C·P·Q·8 B"))
    shape = {"batch": batch, "channels": channels, "height": height, "width": width,
             "kernel_size": kernel_size, "stride": stride, "padding": padding, "mode": mode} | (
        {"dilation": dilation} if dilation != 1 else {}) | ({"ceil_mode": True} if ceil_mode else {}) | (
        {"indices": True} if indices else {})
    return Operator("pool2d", shape, dt, Cost(tuple(items)), simt_roof(dt),
                    facts={"out_height": out_h, "out_width": out_w})


@register("pool2d-backward", source=SRC_CNN)
def pool2d_backward(batch: int, channels: int, height: int, width: int, out_height: int, out_width: int,
                    kernel_size: int, mode: str = "max", dtype: str = "fp32") -> Operator:
    """2-D pooling backward: dx zeroed, then each output gradient added back to its window. Max: read the
    saved int64 index, 1 add per output gradient; average: 1 divide and R·S adds per output gradient."""
    positive("pool2d-backward", batch=batch, channels=channels, height=height, width=width,
             out_height=out_height, out_width=out_width, kernel_size=kernel_size)
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
             note=f"{per_output} per output gradient "
                  f"({'1 add' if mode == 'max' else '1 divide + R·S adds'})"),
    ]
    if mode == "max":
        items.insert(1, Term("read indices", bytes=nbytes(outputs, "int64"), note="N·C·P·Q·8 B"))
    shape = {"batch": batch, "channels": channels, "height": height, "width": width, "out_height": out_height,
             "out_width": out_width, "kernel_size": kernel_size, "mode": mode}
    return Operator("pool2d-backward", shape, dt, Cost(tuple(items)), simt_roof(dt))
