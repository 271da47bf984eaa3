"""aten shape readers of recurrent layers, the transformer fast path (nn.MultiheadAttention's and
nn.TransformerEncoderLayer's fused ops), grouped and scaled (fp8) matmuls, and the attention kernels beyond SDPA's
front door (flash / efficient / cuDNN forward and backward, `flash_attn::`)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from nsroof.costs.ledger.aten_args import (
    NoShape,
    Shape,
    Unrecorded,
    arg,
    dtype_of,
    ledger_op,
    need,
    need_dtype,
    numel,
    recorded,
    register_reader,
)
from nsroof.costs.ledger.attention import LOWER_RIGHT, UPPER_LEFT
from nsroof.costs.ledger.core import Cost, Operator, Roof, Term

# cuDNN / mkldnn RNN mode codes (aten/src/ATen/native/RNN.h: CUDNN_RNN_RELU 0, TANH 1, LSTM 2, GRU 3)
_RNN_MODES = {0: "rnn_relu", 1: "rnn_tanh", 2: "lstm", 3: "gru"}
# c10::ScalarType codes an out_dtype argument records
_SCALAR_TYPES = {5: "fp16", 6: "fp32", 7: "fp64", 15: "bf16", 23: "fp8", 24: "fp8", 25: "fp8", 26: "fp8"}


def _rnn_layer(x: Shape, w_ih: Shape, hidden: int, mode: Any, batch_first: bool, dtype: str, backward: bool) -> Any:
    need(len(x) == 3 and len(w_ih) == 2, "an RNN layer needs a 3-D input and a 2-D input weight")
    need(isinstance(mode, int) and mode in _RNN_MODES, f"RNN mode {mode!r} is not one of {sorted(_RNN_MODES)}")
    seq, batch = (x[1], x[0]) if batch_first else (x[0], x[1])
    return ledger_op("rnn-layer", seq=seq, batch=batch, input_size=w_ih[1], hidden=hidden, mode=_RNN_MODES[mode],
                     dtype=dtype, backward=backward)


def _mkldnn_rnn_layer(s: list[Shape], t: list[str], c: list[Any]) -> Any:
    # mkldnn_rnn_layer(input, w_ih, w_hh, b_ih, b_hh, hx, cx, reverse, batch_sizes, mode, hidden_size,
    # num_layers, has_biases, bidirectional, batch_first, train)
    hidden = recorded(c, 10, "RNN hidden_size not recorded")
    return _rnn_layer(s[0], s[1], hidden, recorded(c, 9, "RNN mode not recorded"), bool(recorded(c, 14, "RNN batch_first not recorded")),
                      need_dtype(t, 0), False)


def _mkldnn_rnn_layer_backward(s: list[Shape], t: list[str], c: list[Any]) -> Any:
    # mkldnn_rnn_layer_backward(input, w1, w2, w3, w4, hx, cx, output, hy, cy, grad_output, grad_hy, grad_cy,
    # reverse, mode, hidden_size, num_layers, has_biases, train, bidirectional, batch_sizes, batch_first, workspace)
    hidden = recorded(c, 15, "RNN hidden_size not recorded")
    return _rnn_layer(s[0], s[1], hidden, recorded(c, 14, "RNN mode not recorded"), bool(recorded(c, 21, "RNN batch_first not recorded")),
                      need_dtype(t, 0), True)


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
            op = ledger_op("rnn-layer", seq=x[0 if not batch_first else 1], batch=x[1 if not batch_first else 0],
                           input_size=w_ih[1], hidden=hidden, mode=mode, dtype=dt, directions=directions)
            total = total + op.cost
        assert op is not None
        return replace(op, shape=dict(op.shape) | {"layers": layers}, cost=total)

    return read


def _transform_bias_rescale_qkv(s: list[Shape], t: list[str], c: list[Any]) -> Any:
    # _transform_bias_rescale_qkv(qkv [B, S, 3E], qkv_bias [3E], num_heads): + bias, q scaled by 1/√d,
    # split into three [B, H, S, D]
    need(len(s) >= 2 and len(s[0]) == 3, "needs a 3-D qkv and its bias")
    n = numel(s[0])
    return ledger_op("pointwise", n=n, read_elements=n + numel(s[1]), flops_per_element=4 / 3, dtype=need_dtype(t, 0),
                     op="bias add (1) + scale of q (1/3 of the elements)")


def _with(op: Operator, *items: Term, formula: str = "", shape: dict[str, Any] | None = None) -> Operator:
    return replace(op, cost=op.cost + Cost(tuple(items)), formula=formula or op.formula,
                   shape=dict(op.shape) | (shape or {}))


def _addmm_activation(s: list[Shape], t: list[str], c: list[Any]) -> Any:
    # _addmm_activation(bias, mat1, mat2, beta, alpha, use_gelu): relu (1) or gelu (5) per output
    need(len(s) >= 3 and len(s[1]) == 2 and len(s[2]) == 2, "needs a bias and two 2-D inputs")
    (m, k), (_, n) = s[1], s[2]
    gelu = bool(recorded(c, 5, "_addmm_activation use_gelu not recorded"))
    op = ledger_op("gemm-bias", m=m, n=n, k=k, bias_elements=max(numel(s[0]), 1), dtype=need_dtype(t, 1))
    return _with(op, Term("gelu" if gelu else "relu", flops=(5.0 if gelu else 1.0) * m * n, note="per output"),
                 shape={"activation": "gelu" if gelu else "relu"})


def _mha_cost(x: Shape, heads: int, e: int, dt: str, skv: int) -> Cost:
    b, sq = (x[0], x[1]) if len(x) == 3 else (1, x[0])
    tokens = b * sq
    qkv = ledger_op("linear", tokens=tokens, in_features=e, out_features=3 * e, dtype=dt, bias=True).cost
    scale = ledger_op("pointwise", n=3 * tokens * e, read_elements=0, flops_per_element=1 / 3, dtype=dt,
                      op="q scaled by 1/√d, in registers").cost
    att = ledger_op("attention", batch_heads=b * heads, sq=sq, skv=skv, d=e // heads, dtype=dt).cost
    proj = ledger_op("linear", tokens=tokens, in_features=e, out_features=e, dtype=dt, bias=True).cost
    return qkv + Cost(tuple(x for x in scale.terms if x.flops)) + att + proj


def _native_mha(s: list[Shape], t: list[str], c: list[Any]) -> Any:
    # _native_multi_head_attention(query, key, value, embed_dim, num_head, qkv_weight, qkv_bias, proj_weight,
    # proj_bias, mask, need_weights, …): in-projection, attention, out-projection, in one op
    need(len(s) >= 3 and len(s[0]) in (2, 3), "needs (batch, seq, embed) query, key and value")
    e, heads = int(recorded(c, 3, "embed_dim not recorded")), int(recorded(c, 4, "num_heads not recorded"))
    need(not bool(recorded(c, 10, "need_weights not recorded")), "need_weights=True (the attention matrix is written) has no formula")
    dt = need_dtype(t, 0)
    cost = _mha_cost(s[0], heads, e, dt, s[1][-2])
    return Operator("multi-head-attention", {"tokens": numel(s[0][:-1]), "embed": e, "heads": heads}, dt, cost,
                    Roof("matmul", dt))


def _encoder_layer(s: list[Shape], t: list[str], c: list[Any]) -> Any:
    # _transformer_encoder_layer_fwd(src, embed_dim, num_heads, qkv_w, qkv_b, proj_w, proj_b, use_gelu,
    # norm_first, eps, norm_w1, norm_b1, norm_w2, norm_b2, ffn_w1, ffn_b1, ffn_w2, ffn_b2, mask, mask_type)
    need(len(s) >= 18 and len(s[0]) in (2, 3) and len(s[14]) == 2, "needs src and the layer's weights")
    e, heads = int(recorded(c, 1, "embed_dim not recorded")), int(recorded(c, 2, "num_heads not recorded"))
    gelu, dt, x = bool(recorded(c, 7, "use_gelu not recorded")), need_dtype(t, 0), s[0]
    tokens, ffn = numel(x[:-1]), s[14][0]
    cost = _mha_cost(x, heads, e, dt, x[-2])
    for _ in range(2):
        cost = cost + ledger_op("layernorm", rows=tokens, hidden=e, dtype=dt).cost
        cost = cost + ledger_op("pointwise", n=tokens * e, read_elements=2 * tokens * e, flops_per_element=1.0,
                                dtype=dt, op="residual add").cost
    cost = cost + ledger_op("linear", tokens=tokens, in_features=e, out_features=ffn, dtype=dt, bias=True).cost
    cost = cost + Cost((Term("gelu" if gelu else "relu", flops=(5.0 if gelu else 1.0) * tokens * ffn),))
    cost = cost + ledger_op("linear", tokens=tokens, in_features=ffn, out_features=e, dtype=dt, bias=True).cost
    return Operator("transformer-encoder-layer", {"tokens": tokens, "embed": e, "heads": heads, "ffn": ffn}, dt,
                    cost, Roof("matmul", dt))


def _grouped_mm(scaled: bool) -> Any:
    """_grouped_mm(mat_a, mat_b, offs, bias, out_dtype); _scaled_grouped_mm(mat_a, mat_b, scale_a, scale_b,
    offs, bias, scale_result, out_dtype, use_fast_accum). A 2-D [M, K] × 3-D [G, K, N] (rows split by offs),
    3-D × 3-D (G products), or 2-D × 2-D with K split by offs (output [G, M, N])."""

    def read(s: list[Shape], t: list[str], c: list[Any]) -> Any:
        need(len(s) >= 2, "needs mat_a and mat_b")
        a, b = s[0], s[1]
        dt = need_dtype(t, 0)
        offs_at, out_at = (4, 7) if scaled else (2, 4)
        if len(c) <= out_at:
            raise Unrecorded("grouped_mm out_dtype not recorded")
        code = arg(c, out_at)
        out_dtype = _SCALAR_TYPES.get(code, "") if isinstance(code, int) else ""
        if scaled and not out_dtype:
            out_dtype = "bf16"  # torch._scaled_grouped_mm's only output dtype when none is given
        offs = s[offs_at] if len(s) > offs_at else []
        index_bytes = numel(offs) * 4.0 if offs else 0.0
        scales = sum(numel(x) * 4.0 for x in s[2:4]) if scaled else 0.0
        if len(a) == 2 and len(b) == 3:
            need(a[1] == b[1], f"grouped_mm shapes {a} and {b} do not agree")
            rows, k, n, groups = a[0], a[1], b[2], b[0]
        elif len(a) == 3 and len(b) == 3:
            need(a[0] == b[0] and a[2] == b[1], f"grouped_mm shapes {a} and {b} do not agree")
            rows, k, n, groups = a[0] * a[1], a[2], b[2], b[0]
        elif len(a) == 2 and len(b) == 2:
            need(a[1] == b[0] and bool(offs), f"grouped_mm shapes {a} and {b} do not agree")
            groups = numel(offs)
            op = ledger_op("grouped-gemm", rows=a[0], k=a[1], n=b[1], groups=1, dtype=dt, out_dtype=out_dtype,
                           scale_bytes=scales, index_bytes=index_bytes)
            extra = (groups - 1) * a[0] * b[1]
            return _with(op, Term("write the other groups' outputs", bytes=extra * op.cost.terms[2].bytes / (a[0] * b[1])))
        else:
            raise NoShape(f"grouped_mm of {len(a)}-D by {len(b)}-D has no formula")
        return ledger_op("grouped-gemm", rows=rows, k=k, n=n, groups=groups, dtype=dt, out_dtype=out_dtype,
                         scale_bytes=scales, index_bytes=index_bytes)

    return read


def _scaled_mm(s: list[Shape], t: list[str], c: list[Any]) -> Any:
    # _scaled_mm(self [M, K], mat2 [K, N], scale_a, scale_b, bias, scale_result, out_dtype, use_fast_accum)
    need(len(s) >= 4 and len(s[0]) == 2 and len(s[1]) == 2, "needs two 2-D inputs and their scales")
    (m, k), (k2, n) = s[0], s[1]
    need(k == k2, f"_scaled_mm inner dimensions differ ({k} vs {k2})")
    if len(c) <= 6:
        raise Unrecorded("_scaled_mm out_dtype not recorded")
    code = arg(c, 6)
    out = _SCALAR_TYPES.get(code, "") if isinstance(code, int) else ""
    scales = sum(numel(x) * 4.0 for x in s[2:4])
    op = ledger_op("grouped-gemm", rows=m, k=k, n=n, groups=1, dtype=need_dtype(t, 0), out_dtype=out,
                   scale_bytes=scales)
    bias = numel(s[4]) if len(s) > 4 and s[4] else 0
    if bias:
        from nsroof.costs.ledger.core import dtype_bytes

        bias_dt = dtype_of(t, 4) or "bf16"
        op = _with(op, Term("read bias", bytes=bias * dtype_bytes(bias_dt)), Term("add bias", flops=1.0 * m * n))
    return replace(op, formula="scaled-gemm")


# xformers' / torch's memory-efficient custom_mask_type (sdp::CustomMaskType): 0 none, 1 CausalFromTopLeft,
# 2 CausalFromBottomRight
_MASK_TYPES: dict[int, str | None] = {0: None, 1: UPPER_LEFT, 2: LOWER_RIGHT}


def _attention(q_at: int, causal_at: int | None, backward: bool, layout: str, mask_type_at: int | None = None,
               align: str = LOWER_RIGHT) -> Any:
    """Attention kernels: `layout` BHSD (SDPA's) or BSHD (flash-attn's and the flash/efficient kernels');
    causal from a flag (its mask aligned as `align`: see attention.causal_pairs), or from custom_mask_type;
    a 3-D query is a packed varlen batch, whose per-sequence lengths (cu_seqlens) are not recorded."""

    def read(s: list[Shape], t: list[str], c: list[Any]) -> Any:
        need(len(s) > q_at + 1, "attention needs query and key")
        q, k = s[q_at], s[q_at + 1]
        if len(q) == 3:
            raise Unrecorded("varlen attention: the per-sequence lengths (cu_seqlens values) are not recorded")
        need(len(q) == 4 and len(k) == 4, "attention needs 4-D query and key")
        if layout == "BHSD":
            b, h, sq, d = q
            skv = k[2]
        else:
            b, sq, h, d = q
            skv = k[1]
        mask_align: str | None = align
        if mask_type_at is not None:
            mask = recorded(c, mask_type_at, "custom_mask_type not recorded")
            need(mask in _MASK_TYPES, f"custom_mask_type {mask!r} has no formula")
            mask_align = _MASK_TYPES[mask]
        elif causal_at is None or not arg(c, causal_at, False):
            mask_align = None
        return ledger_op("attention-backward" if backward else "attention", batch_heads=b * h, sq=sq, skv=skv, d=d,
                         dtype=need_dtype(t, q_at), causal=mask_align is not None,
                         causal_align=mask_align or LOWER_RIGHT)

    return read


register_reader(("mkldnn_rnn_layer",), _mkldnn_rnn_layer)
register_reader(("mkldnn_rnn_layer_backward",), _mkldnn_rnn_layer_backward)
register_reader(("lstm",), _rnn_module("lstm"))
register_reader(("gru",), _rnn_module("gru"))
register_reader(("rnn_tanh",), _rnn_module("rnn_tanh"))
register_reader(("rnn_relu",), _rnn_module("rnn_relu"))
register_reader(("_transform_bias_rescale_qkv",), _transform_bias_rescale_qkv)
register_reader(("_addmm_activation",), _addmm_activation)
register_reader(("_native_multi_head_attention",), _native_mha)
register_reader(("_transformer_encoder_layer_fwd",), _encoder_layer)
register_reader(("_grouped_mm", "grouped_mm"), _grouped_mm(False))
register_reader(("_scaled_grouped_mm",), _grouped_mm(True))
register_reader(("_scaled_mm",), _scaled_mm)
# causal flags: lower-right on FlashAttention 2's kernels (aten::_flash_attention_*, torch's vendored copy, and
# flash_attn:: ≥ 2.1, README changelog 2.1), upper-left on cuDNN's (its set_causal_mask; torch's is_causal)
register_reader(("_flash_attention_forward",), _attention(0, 8, False, "BSHD"))
register_reader(("_flash_attention_backward",), _attention(1, 11, True, "BSHD"))
register_reader(("_efficient_attention_forward",), _attention(0, None, False, "BSHD", mask_type_at=9))
register_reader(("_efficient_attention_backward",), _attention(1, None, True, "BSHD", mask_type_at=14))
register_reader(("_scaled_dot_product_cudnn_attention_backward",), _attention(1, 14, True, "BHSD", align=UPPER_LEFT))
register_reader(("flash_attn::_flash_attn_forward",), _attention(0, 5, False, "BSHD"))
register_reader(("flash_attn::_flash_attn_backward",), _attention(1, 11, True, "BSHD"))
register_reader(("flash_attn::_flash_attn_varlen_forward",), _attention(0, 9, False, "BSHD"))
register_reader(("flash_attn::_flash_attn_varlen_backward",), _attention(1, 13, True, "BSHD"))
