"""aten readers of the recurrent layers (formula: nsroof.costs.ledger.recurrent): the whole-module ops (lstm,
gru, rnn_tanh, rnn_relu: every layer and direction) and mkldnn's per-layer op, forward and backward."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from nsroof.costs.ledger.aten.args import (
    Shape,
    ledger_op,
    need,
    need_dtype,
    recorded,
    register_reader,
)
from nsroof.costs.ledger.core import Cost

# cuDNN / mkldnn RNN mode codes (aten/src/ATen/native/RNN.h: CUDNN_RNN_RELU 0, TANH 1, LSTM 2, GRU 3)
_RNN_MODES = {0: "rnn_relu", 1: "rnn_tanh", 2: "lstm", 3: "gru"}


def _rnn_layer(x: Shape, w_ih: Shape, hidden: int, mode: Any, batch_first: bool, dtype: str,
               backward: bool) -> Any:
    need(len(x) == 3 and len(w_ih) == 2, "an RNN layer needs a 3-D input and a 2-D input weight")
    need(isinstance(mode, int) and mode in _RNN_MODES,
         f"RNN mode {mode!r} is not one of {sorted(_RNN_MODES)}")
    seq, batch = (x[1], x[0]) if batch_first else (x[0], x[1])
    return ledger_op("rnn-layer", seq=seq, batch=batch, input_size=w_ih[1], hidden=hidden,
                     mode=_RNN_MODES[mode], dtype=dtype, backward=backward)


def _mkldnn_rnn_layer(s: list[Shape], t: list[str], c: list[Any]) -> Any:
    # mkldnn_rnn_layer(input, w_ih, w_hh, b_ih, b_hh, hx, cx, reverse, batch_sizes, mode, hidden_size,
    # num_layers, has_biases, bidirectional, batch_first, train)
    hidden = recorded(c, 10, "RNN hidden_size not recorded")
    return _rnn_layer(s[0], s[1], hidden, recorded(c, 9, "RNN mode not recorded"),
                      bool(recorded(c, 14, "RNN batch_first not recorded")), need_dtype(t, 0), False)


def _mkldnn_rnn_layer_backward(s: list[Shape], t: list[str], c: list[Any]) -> Any:
    # mkldnn_rnn_layer_backward(input, w1, w2, w3, w4, hx, cx, output, hy, cy, grad_output, grad_hy, grad_cy,
    # reverse, mode, hidden_size, num_layers, has_biases, train, bidirectional, batch_sizes, batch_first,
    # workspace)
    hidden = recorded(c, 15, "RNN hidden_size not recorded")
    return _rnn_layer(s[0], s[1], hidden, recorded(c, 14, "RNN mode not recorded"),
                      bool(recorded(c, 21, "RNN batch_first not recorded")), need_dtype(t, 0), True)


def _rnn_module(mode: str) -> Any:
    """lstm(input, hx[], params[], has_biases, num_layers, dropout, train, bidirectional, batch_first) and
    gru / rnn_tanh / rnn_relu(input, hx, params[], …): every layer and direction, from the parameter list."""

    def read(s: list[Shape], t: list[str], c: list[Any]) -> Any:
        params: Any = s[2] if len(s) > 2 else []
        need(isinstance(params, list) and bool(params) and all(isinstance(p, list) for p in params),
             "RNN parameter list not recorded")
        has_bias, layers, bidir, batch_first = (bool(recorded(c, 3, "RNN flags not recorded")),
                                                int(recorded(c, 4, "RNN flags not recorded")),
                                                bool(recorded(c, 7, "RNN flags not recorded")),
                                                bool(recorded(c, 8, "RNN flags not recorded")))
        per = (4 if has_bias else 2)
        directions = 2 if bidir else 1
        need(len(params) == per * layers * directions, f"{len(params)} RNN parameters for {layers} layer(s)")
        x, dt, total, op = s[0], need_dtype(t, 0), Cost(), None
        for layer in range(layers):
            w_ih = params[layer * per * directions]
            hidden = params[layer * per * directions + 1][1]
            op = ledger_op("rnn-layer", seq=x[0 if not batch_first else 1],
                           batch=x[1 if not batch_first else 0], input_size=w_ih[1], hidden=hidden, mode=mode,
                           dtype=dt, directions=directions)
            total = total + op.cost
        assert op is not None
        return replace(op, shape=dict(op.shape) | {"layers": layers}, cost=total)

    return read


register_reader(("mkldnn_rnn_layer",), _mkldnn_rnn_layer)
register_reader(("mkldnn_rnn_layer_backward",), _mkldnn_rnn_layer_backward)
register_reader(("lstm",), _rnn_module("lstm"))
register_reader(("gru",), _rnn_module("gru"))
register_reader(("rnn_tanh",), _rnn_module("rnn_tanh"))
register_reader(("rnn_relu",), _rnn_module("rnn_relu"))
