"""aten readers of attention (formulas: nsroof.costs.ledger.attention): SDPA's front door and its kernels
(flash, memory-efficient, cuDNN, CPU flash) forward and backward, `flash_attn::`, and the transformer fast
path (nn.MultiheadAttention's and nn.TransformerEncoderLayer's fused ops). Each kernel's causal mask is
counted aligned where that kernel aligns it (attention.causal_pairs)."""

from __future__ import annotations

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
)
from nsroof.costs.ledger.attention import LOWER_RIGHT, UPPER_LEFT
from nsroof.costs.ledger.core import Cost, Operator, Roof, Term


def _attention_reader(q_at: int, causal_at: int, backward: bool, align: str) -> Reader:
    """SDPA ops (BHSD): `is_causal` applies the mask aligned as `align` (attention.causal_pairs says which
    kernel aligns it where)."""

    def read(s: list[Shape], t: list[str], c: list[Any]) -> Any:
        need(len(s) > q_at + 1 and len(s[q_at]) == 4 and len(s[q_at + 1]) == 4,
             "attention needs 4-D (batch, heads, seq, dim) query and key")
        b, h, sq, d = s[q_at]
        skv = s[q_at + 1][2]
        causal = bool(arg(c, causal_at, False))
        return ledger_op("attention-backward" if backward else "attention", batch_heads=b * h, sq=sq, skv=skv,
                         d=d, dtype=need_dtype(t, q_at), causal=causal, causal_align=align)

    return read


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
            raise Unrecorded("varlen attention: the per-sequence lengths (cu_seqlens values) are not "
                             "recorded")
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
        return ledger_op("attention-backward" if backward else "attention", batch_heads=b * h, sq=sq, skv=skv,
                         d=d, dtype=need_dtype(t, q_at), causal=mask_align is not None,
                         causal_align=mask_align or LOWER_RIGHT)

    return read


def _transform_bias_rescale_qkv(s: list[Shape], t: list[str], c: list[Any]) -> Any:
    # _transform_bias_rescale_qkv(qkv [B, S, 3E], qkv_bias [3E], num_heads): + bias, q scaled by 1/√d,
    # split into three [B, H, S, D]
    need(len(s) >= 2 and len(s[0]) == 3, "needs a 3-D qkv and its bias")
    n = numel(s[0])
    return ledger_op("pointwise", n=n, read_elements=n + numel(s[1]), flops_per_element=4 / 3,
                     dtype=need_dtype(t, 0), op="bias add (1) + scale of q (1/3 of the elements)")


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
    need(not bool(recorded(c, 10, "need_weights not recorded")),
         "need_weights=True (the attention matrix is written) has no formula")
    dt = need_dtype(t, 0)
    cost = _mha_cost(s[0], heads, e, dt, s[1][-2])
    return Operator("multi-head-attention", {"tokens": numel(s[0][:-1]), "embed": e, "heads": heads}, dt,
                    cost, Roof("matmul", dt))


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
        cost = cost + ledger_op("pointwise", n=tokens * e, read_elements=2 * tokens * e,
                                flops_per_element=1.0, dtype=dt, op="residual add").cost
    cost = cost + ledger_op("linear", tokens=tokens, in_features=e, out_features=ffn, dtype=dt,
                            bias=True).cost
    cost = cost + Cost((Term("gelu" if gelu else "relu", flops=(5.0 if gelu else 1.0) * tokens * ffn),))
    cost = cost + ledger_op("linear", tokens=tokens, in_features=ffn, out_features=e, dtype=dt,
                            bias=True).cost
    return Operator("transformer-encoder-layer", {"tokens": tokens, "embed": e, "heads": heads, "ffn": ffn},
                    dt, cost, Roof("matmul", dt))


# is_causal: upper-left on the composite op (PyTorch docs: causal_upper_left "is equivalent to the
# is_causal=True argument in scaled_dot_product_attention"), the CPU flash kernel (checked against torch's
# masks in the tests), the memory-efficient kernel (is_causal -> CausalFromTopLeft) and cuDNN (its
# set_causal_mask, top-left); lower-right on the CUDA flash kernel, FlashAttention 2's
# (torch.nn.attention.bias: "for this particular op it means lower right"; torch's dispatcher never sends it a
# non-square is_causal, CausalBias's lower-right dispatch does)
register_reader(("scaled_dot_product_attention",), _attention_reader(0, 5, False, UPPER_LEFT))
register_reader(("_scaled_dot_product_flash_attention",), _attention_reader(0, 4, False, LOWER_RIGHT))
register_reader(("_scaled_dot_product_flash_attention_for_cpu",), _attention_reader(0, 4, False, UPPER_LEFT))
register_reader(("_scaled_dot_product_efficient_attention", "_scaled_dot_product_cudnn_attention"),
                _attention_reader(0, 6, False, UPPER_LEFT))
register_reader(("_scaled_dot_product_flash_attention_for_cpu_backward",),
                _attention_reader(1, 7, True, UPPER_LEFT))
register_reader(("_scaled_dot_product_flash_attention_backward",),
                _attention_reader(1, 11, True, LOWER_RIGHT))
register_reader(("_scaled_dot_product_efficient_attention_backward",),
                _attention_reader(1, 11, True, UPPER_LEFT))
register_reader(("_transform_bias_rescale_qkv",), _transform_bias_rescale_qkv)
register_reader(("_native_multi_head_attention",), _native_mha)
register_reader(("_transformer_encoder_layer_fwd",), _encoder_layer)
# causal flags: lower-right on FlashAttention 2's kernels (aten::_flash_attention_*, torch's vendored copy,
# and flash_attn:: ≥ 2.1, README changelog 2.1), upper-left on cuDNN's (its set_causal_mask;
# torch's is_causal)
register_reader(("_flash_attention_forward",), _attention(0, 8, False, "BSHD"))
register_reader(("_flash_attention_backward",), _attention(1, 11, True, "BSHD"))
register_reader(("_efficient_attention_forward",), _attention(0, None, False, "BSHD", mask_type_at=9))
register_reader(("_efficient_attention_backward",), _attention(1, None, True, "BSHD", mask_type_at=14))
register_reader(("_scaled_dot_product_cudnn_attention_backward",),
                _attention(1, 14, True, "BHSD", align=UPPER_LEFT))
register_reader(("flash_attn::_flash_attn_forward",), _attention(0, 5, False, "BSHD"))
register_reader(("flash_attn::_flash_attn_backward",), _attention(1, 11, True, "BSHD"))
register_reader(("flash_attn::_flash_attn_varlen_forward",), _attention(0, 9, False, "BSHD"))
register_reader(("flash_attn::_flash_attn_varlen_backward",), _attention(1, 13, True, "BSHD"))
