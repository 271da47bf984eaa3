"""Recurrent layers, forward and backward (rnn-layer: LSTM, GRU, tanh and relu RNN cells over a sequence).

Sources: the ledger convention (nsroof.costs.ledger.core), counted from each cell's definition (the
derivation is in the docstring).
"""

from __future__ import annotations

from nsroof.costs.ledger.core import (
    SRC_SEQ,
    Cost,
    LedgerError,
    Operator,
    Roof,
    Term,
    canonical_dtype,
    nbytes,
    positive,
)
from nsroof.costs.ledger.registry import register

# gates per cell and elementwise FLOPs per hidden unit of one cell step
_CELLS: dict[str, tuple[int, float, str]] = {
    "lstm": (4, 15.0, "3 sigmoids (9) + 2 tanh (2) + c = f·c + i·g (3) + h = o·tanh(c) (1)"),
    "gru": (3, 12.0, "2 sigmoids (6) + n = tanh(x_n + r·h_n) (3) + h = (1 − z)·n + z·h (3)"),
    "rnn_tanh": (1, 1.0, "tanh"), "rnn_relu": (1, 1.0, "relu"),
}


@register("rnn-layer", source=SRC_SEQ)
def rnn_layer(seq: int, batch: int, input_size: int, hidden: int, mode: str = "lstm", dtype: str = "fp32",
              directions: int = 1, backward: bool = False, bias: bool = True) -> Operator:
    """One recurrent layer over `seq` steps: per step and direction the gate matmuls x·W_ih^T and h·W_hh^T
    (2·batch·G·hidden·(input + hidden) FLOP, G = 4 LSTM, 3 GRU, 1 RNN), the two bias adds and the cell's
    elementwise math. Backward: dX, dh and dW are the same matmuls twice over (2×), the cell's derivative as
    much elementwise work again (1×), the bias gradients one add per gate output. Bytes: x, the weights and
    h0 (c0) read, the outputs and final states written; backward reads dy and the saved gates, writes dx and
    dW."""
    if mode not in _CELLS:
        raise LedgerError(f"rnn-layer: mode must be one of {', '.join(_CELLS)}, got {mode!r}")
    positive("rnn-layer", seq=seq, batch=batch, input_size=input_size, hidden=hidden, directions=directions)
    gates, cell_flops, cell_note = _CELLS[mode]
    dt = canonical_dtype(dtype)
    steps = seq * directions
    weights = directions * gates * hidden * (input_size + hidden + (2 if bias else 0))
    matmul = 2.0 * steps * batch * gates * hidden * (input_size + hidden)
    states = directions * batch * hidden * (2 if mode == "lstm" else 1)
    items = [Term("read x", bytes=nbytes(seq * batch * input_size, dt), note="seq·batch·input"),
             Term("read weights", bytes=nbytes(weights, dt),
                  note="directions·G·hidden·(input + hidden + 2 biases)"),
             Term("read h0 (c0), write final states", bytes=2 * nbytes(states, dt),
                  note="directions·batch·hidden"),
             Term("write outputs", bytes=nbytes(seq * batch * hidden * directions, dt),
                  note="seq·batch·hidden·dirs")]
    if backward:
        items = [Term("read dy, x, saved gates",
                      bytes=nbytes(seq * batch * (hidden * directions + input_size
                                                  + gates * hidden * directions), dt)),
                 Term("read weights, write dW", bytes=2 * nbytes(weights, dt)),
                 Term("write dx", bytes=nbytes(seq * batch * input_size, dt)),
                 Term("dx, dh, dW matmuls", flops=2 * matmul, note="2 × the forward's gate matmuls"),
                 Term("cell derivative", flops=cell_flops * steps * batch * hidden,
                      note=f"as the forward: {cell_note}"),
                 Term("bias gradients", flops=1.0 * steps * batch * gates * hidden,
                      note="1 add per gate output")]
    else:
        items += [Term("gate matmuls", flops=matmul, note="2·steps·batch·G·hidden·(input + hidden)"),
                  Term("bias adds", flops=(2.0 if bias else 0.0) * steps * batch * gates * hidden,
                       note="2 per gate"),
                  Term("cell", flops=cell_flops * steps * batch * hidden, note=cell_note)]
    shape = {"seq": seq, "batch": batch, "input_size": input_size, "hidden": hidden, "mode": mode} | (
        {"directions": directions} if directions != 1 else {}) | ({"backward": True} if backward else {})
    return Operator("rnn-layer", shape, dt, Cost(tuple(items)), Roof("matmul", dt))
