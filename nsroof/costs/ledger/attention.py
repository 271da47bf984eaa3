"""Attention: where a causal mask's diagonal sits (causal_pairs), the fused forward (attention: minimum
traffic) and backward (attention-backward: five matmuls over the recomputed scores), and the HBM element
traffic of the naive three-kernel formulation against the tiled one (attention-traffic).

Sources: the ledger convention (nsroof.costs.ledger.core): fused attention's minimum traffic and softmax
FLOPs, the backward derived from the forward algebra; FlashAttention (Dao et al., NeurIPS 2022): naive vs
tiled attention element counts, crossover block_m > d/2.
"""

from __future__ import annotations

from typing import Any

from nsroof.costs.ledger.core import (
    SRC_LEDGER,
    SRC_TORCH,
    SRC_TRAFFIC,
    Cost,
    LedgerError,
    Operator,
    Roof,
    Term,
    canonical_dtype,
    dtype_bytes,
    nbytes,
    positive,
)
from nsroof.costs.ledger.registry import register

# Where a causal mask's diagonal sits when seq_q != seq_kv (the two agree when they are equal):
# - UPPER_LEFT, `torch.tril(ones(sq, skv))`, query i sees keys j <= i: torch's `is_causal` ("causal_upper_left
#   ... is equivalent to the is_causal=True argument in scaled_dot_product_attention", PyTorch docs,
#   torch.nn.attention.bias), on the math, CPU flash, memory-efficient (custom_mask_type 1, CausalFromTopLeft)
#   and cuDNN paths;
# - LOWER_RIGHT, `torch.tril(ones(sq, skv), diagonal=skv - sq)`, query i sees keys j <= i + skv - sq: the
#   queries are the newest tokens. FlashAttention ≥ 2.1 ("if seqlen_q != seqlen_k and causal=True, the causal
#   mask is aligned to the bottom right corner", flash-attention README, changelog 2.1), so the CUDA flash
#   kernels torch vendors (aten::_flash_attention_*, _scaled_dot_product_flash_attention, which torch's
#   dispatcher therefore never picks for a non-square is_causal); memory-efficient custom_mask_type 2
#   (CausalFromBottomRight); engines' prefill with a cached context (vLLM unified attention).
UPPER_LEFT = "upper_left"


LOWER_RIGHT = "lower_right"


CAUSAL_ALIGNS = (UPPER_LEFT, LOWER_RIGHT)


def causal_pairs(sq: int, skv: int, align: str = LOWER_RIGHT) -> int:
    """Unmasked (query, key) pairs of a causal mask over sq queries and skv keys (one batch·head).
    LOWER_RIGHT: Σ_{i<sq} clip(i + 1 + skv - sq, 0, skv) = sq·(skv - sq + 1) + sq·(sq - 1)/2 when skv >= sq
    (sq = 1 decode: every key), skv(skv + 1)/2 when sq > skv (the first sq - skv queries see nothing).
    UPPER_LEFT: Σ_{i<sq} min(i + 1, skv) = sq(sq + 1)/2 when sq <= skv,
    skv(skv + 1)/2 + (sq - skv)·skv otherwise.
    Both are N(N + 1)/2 for sq = skv = N (about half of N²)."""
    if align not in CAUSAL_ALIGNS:
        raise LedgerError(f"causal_align {align!r} is not one of {', '.join(CAUSAL_ALIGNS)}")
    if align == UPPER_LEFT:
        if sq <= skv:
            return sq * (sq + 1) // 2
        return skv * (skv + 1) // 2 + (sq - skv) * skv
    if skv >= sq:
        return sq * (skv - sq + 1) + sq * (sq - 1) // 2
    return skv * (skv + 1) // 2


def causal_shape(sq: int, skv: int, causal: bool, align: str) -> dict[str, Any]:
    """The causal keys of an attention formula's shape: the alignment only where it changes the count."""
    if align not in CAUSAL_ALIGNS:
        raise LedgerError(f"causal_align {align!r} is not one of {', '.join(CAUSAL_ALIGNS)}")
    if not causal:
        return {}
    return {"causal": True} | ({"causal_align": align} if sq != skv else {})


@register("attention", source=SRC_LEDGER)
def attention(batch_heads: int, sq: int, skv: int, d: int, dtype: str = "fp16", causal: bool = False,
              causal_align: str = LOWER_RIGHT) -> Operator:
    """Fused (flash-style) attention, minimum traffic: read Q, K, V, write O; QK^T + PV + softmax FLOPs.
    A causal mask counts its visible scores only, its diagonal where `causal_align` says (see
    causal_pairs)."""
    positive("attention", batch_heads=batch_heads, sq=sq, skv=skv, d=d)
    dt = canonical_dtype(dtype)
    b = dtype_bytes(dt)
    bh = batch_heads
    scores = causal_pairs(sq, skv, causal_align) if causal else sq * skv
    aligned = f", aligned {causal_align.replace('_', '-')}" if sq != skv else ""
    score_note = (f"{scores:,} visible scores per head (causal mask{aligned})" if causal
                  else "sq·skv scores per head")
    items = (
        Term("read Q", bytes=nbytes(bh * sq * d, dt), note=f"bh·sq·d·{b:g} B"),
        Term("read K", bytes=nbytes(bh * skv * d, dt), note=f"bh·skv·d·{b:g} B"),
        Term("read V", bytes=nbytes(bh * skv * d, dt), note=f"bh·skv·d·{b:g} B"),
        Term("write O", bytes=nbytes(bh * sq * d, dt), note=f"bh·sq·d·{b:g} B"),
        Term("QK^T + PV", flops=4.0 * bh * scores * d,
             note=f"2 matmuls × 2 FLOP per multiply-add; {score_note}"),
        Term("softmax", flops=5.0 * bh * scores + 1.0 * bh * sq * d,
             note="scale, running max, subtract, exp, sum: 5 per score; 1 divide per output element"),
    )
    shape = {"batch_heads": bh, "sq": sq, "skv": skv, "d": d} | causal_shape(sq, skv, causal, causal_align)
    return Operator("attention", shape, dt, Cost(items), Roof("matmul", dt),
                    facts={"scores_per_head": scores})


@register("attention-backward", source=SRC_TORCH)
def attention_backward(batch_heads: int, sq: int, skv: int, d: int, dtype: str = "fp16", causal: bool = False,
                       causal_align: str = LOWER_RIGHT) -> Operator:
    """Fused (flash-style) attention backward: recompute S = QK^T, then dV = P^T·dO, dP = dO·V^T,
    dQ = dS·K, dK = dS^T·Q: five matmuls of 2·scores·d FLOP each (10·scores·d, 2.5× the forward's 4·scores·d).
    Softmax backward: exp of the recomputed scores (2 per score: subtract the saved log-sum-exp, exp),
    dS = P∘(dP − D) (2 per score), D = rowsum(dO∘O) (2 per query element).
    Minimum traffic: read Q, K, V, O, dO and the fp32 log-sum-exp, write dQ, dK, dV.
    A causal mask counts its visible scores only, its diagonal where `causal_align` says (causal_pairs)."""
    positive("attention-backward", batch_heads=batch_heads, sq=sq, skv=skv, d=d)
    dt = canonical_dtype(dtype)
    b = dtype_bytes(dt)
    bh = batch_heads
    shape = {"batch_heads": bh, "sq": sq, "skv": skv, "d": d} | causal_shape(sq, skv, causal, causal_align)
    scores = causal_pairs(sq, skv, causal_align) if causal else sq * skv
    items = (
        Term("read Q, O, dO", bytes=3 * nbytes(bh * sq * d, dt), note=f"3·bh·sq·d·{b:g} B"),
        Term("read K, V", bytes=2 * nbytes(bh * skv * d, dt), note=f"2·bh·skv·d·{b:g} B"),
        Term("read log-sum-exp", bytes=nbytes(bh * sq, "fp32"), note="bh·sq·4 B"),
        Term("write dQ", bytes=nbytes(bh * sq * d, dt), note=f"bh·sq·d·{b:g} B"),
        Term("write dK, dV", bytes=2 * nbytes(bh * skv * d, dt), note=f"2·bh·skv·d·{b:g} B"),
        Term("5 matmuls", flops=10.0 * bh * scores * d, note="S recompute, dV, dP, dQ, dK: 2·scores·d each"),
        Term("softmax backward", flops=4.0 * bh * scores + 2.0 * bh * sq * d,
             note="P recompute 2 + dS 2 per score; D = rowsum(dO∘O) 2 per query element"),
    )
    return Operator("attention-backward", shape, dt, Cost(items), Roof("matmul", dt),
                    facts={"scores_per_head": scores})


def ceil_div(a: int, b: int) -> int:
    return -(-a // b)


def _elements(name: str, elements: int, dt: str, note: str = "") -> Term:
    return Term(name, bytes=nbytes(elements, dt), elements=elements, note=note)


@register("attention-traffic", source=SRC_TRAFFIC)
def attention_traffic(
    sq: int, skv: int, d: int, block_m: int = 128, block_n: int = 128, dtype: str = "fp16",
    batch_heads: int = 1
) -> Operator:
    """Naive three-kernel attention vs tiled online-softmax, in HBM elements moved (per batch_heads pairs)."""
    positive("attention-traffic", sq=sq, skv=skv, d=d, block_m=block_m, block_n=block_n,
             batch_heads=batch_heads)
    dt = canonical_dtype(dtype)
    bh = batch_heads
    q_blocks = ceil_div(sq, block_m)
    kv_blocks = ceil_div(skv, block_n)
    s = bh * sq * skv
    # Both formulations do the same arithmetic; only where S and P live differs.
    work = (
        Term("QK^T + PV", flops=4.0 * bh * sq * skv * d, note="2 matmuls × 2 FLOP per multiply-add"),
        Term("softmax", flops=5.0 * s + 1.0 * bh * sq * d, note="5 per score + 1 divide per output element"),
    )
    naive = Cost(
        (
            _elements("Q read", bh * sq * d, dt, "sq·d (S = QK^T)"),
            _elements("K read", bh * skv * d, dt, "skv·d"),
            _elements("S write", s, dt, "sq·skv: S materialised in HBM"),
            _elements("S read", s, dt, "sq·skv: softmax reads S"),
            _elements("P write", s, dt, "sq·skv"),
            _elements("P read", s, dt, "sq·skv: PV reads P"),
            _elements("V read", bh * skv * d, dt, "skv·d"),
            _elements("O write", bh * sq * d, dt, "sq·d"),
            *work,
        ),
        ("naive: three kernels, S and P (sq×skv each) written to and read back from HBM",),
    )
    tiled = Cost(
        (
            _elements("Q read", bh * sq * d, dt, "sq·d: each Q block reads its own rows"),
            _elements("K read", bh * q_blocks * skv * d, dt, f"ceil(sq/block_m)·skv·d = {q_blocks}·skv·d"),
            _elements("V read", bh * q_blocks * skv * d, dt, f"ceil(sq/block_m)·skv·d = {q_blocks}·skv·d"),
            _elements("O write", bh * sq * d, dt, "sq·d; the per-row scale is negligible and not counted"),
            _elements("S write", 0, dt, "never leaves the chip"),
            _elements("S read", 0, dt),
            _elements("P write", 0, dt),
            _elements("P read", 0, dt),
            *work,
        ),
        ("tiled: every Q block rescans all of K and V once; nothing of size sq×skv leaves the chip",),
    )
    facts = {
        "q_blocks": q_blocks,
        "kv_blocks": kv_blocks,
        "naive_elements": naive.elements,
        "tiled_elements": tiled.elements,
        "ratio_naive_over_tiled": naive.elements / tiled.elements,
        # Asymptotic forms the seed prints next to the model totals.
        "naive_asymptotic_elements": bh * (4 * sq * skv + 2 * (sq + skv) * d),
        "tiled_asymptotic_elements": bh * 2 * q_blocks * skv * d,
        # Prefill (sq = skv = N): tiled wins while 2·(N/block_m)·N·d < 4·N·N, i.e. block_m > d/2.
        "crossover_block_m": d / 2,
    }
    shape = {"sq": sq, "skv": skv, "d": d, "block_m": block_m, "block_n": block_n} | (
        {"batch_heads": bh} if bh != 1 else {})
    return Operator("attention-traffic", shape, dt, tiled, Roof("matmul", dt), variants={"naive": naive},
                    facts=facts)
