"""Ledger formulas of recurrent layers, grouped and scaled (fp8) matmuls, resampling and sorting. Same convention
as the core (nsroof.costs.ledger.core): inputs read once, outputs written once, a basic op or a transcendental
is 1 FLOP, a multiply-add 2. The arithmetic of each term is in its note; each docstring gives the derivation.
"""

from __future__ import annotations

import math

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

SRC_SEQ = "nsroof ops_seq (ledger convention; counted from each op's definition)"

# gates per cell and elementwise FLOPs per hidden unit of one cell step
_CELLS: dict[str, tuple[int, float, str]] = {
    "lstm": (4, 15.0, "3 sigmoids (9) + 2 tanh (2) + c = f·c + i·g (3) + h = o·tanh(c) (1)"),
    "gru": (3, 12.0, "2 sigmoids (6) + n = tanh(x_n + r·h_n) (3) + h = (1 − z)·n + z·h (3)"),
    "rnn_tanh": (1, 1.0, "tanh"), "rnn_relu": (1, 1.0, "relu"),
}


def _positive(formula: str, **values: float) -> None:
    for name, value in values.items():
        if not value > 0:
            raise LedgerError(f"{formula}: {name} must be > 0, got {value}")


@register("rnn-layer", source=SRC_SEQ)
def rnn_layer(seq: int, batch: int, input_size: int, hidden: int, mode: str = "lstm", dtype: str = "fp32",
              directions: int = 1, backward: bool = False, bias: bool = True) -> Operator:
    """One recurrent layer over `seq` steps: per step and direction the gate matmuls x·W_ih^T and h·W_hh^T
    (2·batch·G·hidden·(input + hidden) FLOP, G = 4 LSTM, 3 GRU, 1 RNN), the two bias adds and the cell's
    elementwise math. Backward: dX, dh and dW are the same matmuls twice over (2×), the cell's derivative as
    much elementwise work again (1×), the bias gradients one add per gate output. Bytes: x, the weights and
    h0 (c0) read, the outputs and final states written; backward reads dy and the saved gates, writes dx and dW."""
    if mode not in _CELLS:
        raise LedgerError(f"rnn-layer: mode must be one of {', '.join(_CELLS)}, got {mode!r}")
    _positive("rnn-layer", seq=seq, batch=batch, input_size=input_size, hidden=hidden, directions=directions)
    gates, cell_flops, cell_note = _CELLS[mode]
    dt = canonical_dtype(dtype)
    steps = seq * directions
    weights = directions * gates * hidden * (input_size + hidden + (2 if bias else 0))
    matmul = 2.0 * steps * batch * gates * hidden * (input_size + hidden)
    states = directions * batch * hidden * (2 if mode == "lstm" else 1)
    items = [Term("read x", bytes=nbytes(seq * batch * input_size, dt), note="seq·batch·input"),
             Term("read weights", bytes=nbytes(weights, dt), note="directions·G·hidden·(input + hidden + 2 biases)"),
             Term("read h0 (c0), write final states", bytes=2 * nbytes(states, dt), note="directions·batch·hidden"),
             Term("write outputs", bytes=nbytes(seq * batch * hidden * directions, dt), note="seq·batch·hidden·dirs")]
    if backward:
        items = [Term("read dy, x, saved gates", bytes=nbytes(seq * batch * (hidden * directions + input_size
                                                                            + gates * hidden * directions), dt)),
                 Term("read weights, write dW", bytes=2 * nbytes(weights, dt)),
                 Term("write dx", bytes=nbytes(seq * batch * input_size, dt)),
                 Term("dx, dh, dW matmuls", flops=2 * matmul, note="2 × the forward's gate matmuls"),
                 Term("cell derivative", flops=cell_flops * steps * batch * hidden, note=f"as the forward: {cell_note}"),
                 Term("bias gradients", flops=1.0 * steps * batch * gates * hidden, note="1 add per gate output")]
    else:
        items += [Term("gate matmuls", flops=matmul, note="2·steps·batch·G·hidden·(input + hidden)"),
                  Term("bias adds", flops=(2.0 if bias else 0.0) * steps * batch * gates * hidden, note="2 per gate"),
                  Term("cell", flops=cell_flops * steps * batch * hidden, note=cell_note)]
    shape = {"seq": seq, "batch": batch, "input_size": input_size, "hidden": hidden, "mode": mode} | (
        {"directions": directions} if directions != 1 else {}) | ({"backward": True} if backward else {})
    return Operator("rnn-layer", shape, dt, Cost(tuple(items)), Roof("matmul", dt))


@register("grouped-gemm", source=SRC_SEQ + "; torch._grouped_mm / F.grouped_mm")
def grouped_gemm(rows: int, k: int, n: int, groups: int, dtype: str = "bf16", out_dtype: str = "",
                 scale_bytes: float = 0.0, index_bytes: float = 0.0, b_per_group: bool = True) -> Operator:
    """Grouped GEMM: `rows` rows of A [rows, k], each multiplied by its group's B [k, n] (a 2-D A split by
    offsets, or `groups` stacked products): 2·rows·k·n FLOP. Bytes: A, every B once, the output once, the
    fp8 scales and the offsets."""
    _positive("grouped-gemm", rows=rows, k=k, n=n, groups=groups)
    dt = canonical_dtype(dtype)
    odt = canonical_dtype(out_dtype or dtype)
    b_elements = (groups if b_per_group else 1) * k * n
    items = [Term("read A", bytes=nbytes(rows * k, dt), note=f"rows·k·{dtype_bytes(dt):g} B"),
             Term("read B", bytes=nbytes(b_elements, dt), note="groups·k·n"),
             Term("write C", bytes=nbytes(rows * n, odt), note=f"rows·n·{dtype_bytes(odt):g} B ({odt})"),
             Term("2·rows·k·n", flops=2.0 * rows * k * n, note="each row of A meets one group's B")]
    if scale_bytes:
        items.append(Term("read scales", bytes=scale_bytes, note="the recorded scale tensors"))
    if index_bytes:
        items.append(Term("read offsets", bytes=index_bytes, note="group offsets"))
    shape = {"rows": rows, "k": k, "n": n, "groups": groups} | ({"out_dtype": odt} if odt != dt else {})
    return Operator("grouped-gemm", shape, dt, Cost(tuple(items)), Roof("matmul", dt))


_TAPS = {"nearest": 0, "nearest-exact": 0, "linear": 2, "bilinear": 4, "trilinear": 8, "bicubic": 16}


@register("upsample", source=SRC_SEQ)
def upsample(planes: int, inputs: int, outputs: int, mode: str = "bilinear", dtype: str = "fp32",
             backward: bool = False) -> Operator:
    """Resampling (F.interpolate) of `planes` (N·C) planes of `inputs` elements to `outputs`: each output a
    weighted sum of T taps (nearest 1 copy, linear 2, bilinear 4, trilinear 8, bicubic 16): T multiplies and
    T − 1 adds = 2T − 1 FLOP. Backward: each dy element scattered to its T taps, a multiply-add each (2T)."""
    if mode not in _TAPS:
        raise LedgerError(f"upsample: mode must be one of {', '.join(_TAPS)}, got {mode!r}")
    _positive("upsample", planes=planes, inputs=inputs, outputs=outputs)
    dt = canonical_dtype(dtype)
    taps = _TAPS[mode]
    per = (2.0 * taps) if backward else max(2.0 * taps - 1, 0.0)
    small, big = (outputs, inputs) if backward else (inputs, outputs)
    items = (Term("read dy" if backward else "read x", bytes=nbytes(planes * small, dt)),
             Term("write dx" if backward else "write y", bytes=nbytes(planes * big, dt)),
             Term(f"{mode} weights", flops=per * planes * outputs, note=f"{per:g} per output element ({taps} taps)"))
    shape = {"planes": planes, "inputs": inputs, "outputs": outputs, "mode": mode} | (
        {"backward": True} if backward else {})
    return Operator("upsample", shape, dt, Cost(items), Roof("simt", "fp64" if dt == "fp64" else "fp32"))


@register("sort", source=SRC_SEQ)
def sort(rows: int, cols: int, k: int = 0, dtype: str = "fp32") -> Operator:
    """Sort (k = 0) or top-k along rows of `cols`: cols·⌈log2 cols⌉ compares per row for a sort, cols·⌈log2 k⌉
    (a k-heap) for top-k, at least one per element; writes the values and their int64 indices."""
    _positive("sort", rows=rows, cols=cols)
    dt = canonical_dtype(dtype)
    kept = k or cols
    depth = max(math.ceil(math.log2(max(kept, 2))), 1)
    items = (Term("read x", bytes=nbytes(rows * cols, dt)),
             Term("write values + int64 indices", bytes=nbytes(rows * kept, dt) + nbytes(rows * kept, "int64")),
             Term("compares", flops=1.0 * rows * cols * depth, note=f"cols·⌈log2 {kept}⌉ = {depth} per element"))
    return Operator("sort", {"rows": rows, "cols": cols} | ({"k": k} if k else {}), dt, Cost(items),
                    Roof("simt", "fp32"))
