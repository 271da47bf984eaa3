"""The registered formulas. Each builds an Operator from its own algebra; the arithmetic of every
term is in its note, and each formula names its source.

Sources:
  the roofline model (Williams, Waterman, Patterson, CACM 2009): gemm best/worst traffic, decode I = 2·batch/bytes
  the ledger convention (nsroof.costs.ledger.core): elementwise chain, rmsnorm, fused norm+rope+quant,
                     fused attention minimum traffic and softmax FLOPs
  FlashAttention (Dao et al., NeurIPS 2022): naive vs tiled attention element counts, crossover block_m > d/2
  NVIDIA GPU Performance Background User's Guide §4: the 4096×1024 layer on 512 / 1 examples
"""

from __future__ import annotations

from typing import Any

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

# Printed by `nsroof ledger`: public sources only (the seed documents these formulas grew from are not shipped)
SRC_ROOFLINE = "roofline model: Williams, Waterman & Patterson, Roofline, CACM 52(4), 2009"
SRC_LEDGER = "ledger convention: inputs read once, outputs written once (compulsory traffic)"
SRC_TRAFFIC = ("HBM element-traffic model of attention: Dao et al., FlashAttention, NeurIPS 2022 (naive vs tiled "
               "traffic)")
SRC_LAYER = "NVIDIA Deep Learning Performance Guide, GPU Performance Background (worked example)"


def _positive(formula: str, **values: float) -> None:
    for name, value in values.items():
        if not value > 0:
            raise LedgerError(f"{formula}: {name} must be > 0, got {value}")


def _non_negative(formula: str, **values: float) -> None:
    for name, value in values.items():
        if value < 0:
            raise LedgerError(f"{formula}: {name} must be >= 0, got {value}")


def ceil_div(a: int, b: int) -> int:
    return -(-a // b)


# --------------------------------------------------------------------------- matmuls


def _gemm(name: str, m: int, n: int, k: int, dtype: str, batch: int) -> Operator:
    _positive(name, m=m, n=n, k=k, batch=batch)
    dt = canonical_dtype(dtype)
    b = dtype_bytes(dt)
    read_a = Term("read A", bytes=nbytes(batch * m * k, dt), note=f"batch·m·k·{b:g} B")
    write_c = Term("write C", bytes=nbytes(batch * m * n, dt), note=f"batch·m·n·{b:g} B")
    work = Term("2·m·n·k", flops=2.0 * batch * m * n * k, note="one multiply-add (2 FLOP) per inner-product term")
    best = Cost(
        (read_a, Term("read B", bytes=nbytes(batch * k * n, dt), note=f"batch·k·n·{b:g} B"), write_c, work),
        ("best case: each matrix streamed from DRAM exactly once",),
    )
    worst = Cost(
        (read_a, Term("re-read B per row of A", bytes=nbytes(batch * m * k * n, dt), note=f"batch·m·k·n·{b:g} B"),
         write_c, work),
        ("worst case: no reuse, B re-read for every row of A",),
    )
    shape = {"m": m, "n": n, "k": k} | ({"batch": batch} if batch != 1 or name == "bmm" else {})
    return Operator(name, shape, dt, best, Roof("matmul", dt), variants={"worst": worst})


@register("gemm", source=SRC_ROOFLINE)
def gemm(m: int, n: int, k: int, dtype: str = "bf16", batch: int = 1) -> Operator:
    """C[m,n] = A[m,k] @ B[k,n] (batch independent products when batch > 1); best/worst traffic."""
    return _gemm("gemm", m, n, k, dtype, batch)


@register("bmm", source=SRC_ROOFLINE)
def bmm(batch: int, m: int, n: int, k: int, dtype: str = "bf16") -> Operator:
    """Batched GEMM: batch independent C[m,n] = A[m,k] @ B[k,n]."""
    return _gemm("bmm", m, n, k, dtype, batch)


@register("linear", source=SRC_LAYER)
def linear(tokens: int, in_features: int, out_features: int, dtype: str = "fp16", bias: bool = False) -> Operator:
    """y[tokens,out] = x[tokens,in] @ W[out,in]^T (+ b): a fully connected layer on a batch of tokens."""
    _positive("linear", tokens=tokens, in_features=in_features, out_features=out_features)
    dt = canonical_dtype(dtype)
    b = dtype_bytes(dt)
    items = [
        Term("read weights", bytes=nbytes(out_features * in_features, dt), note=f"out·in·{b:g} B, once per batch"),
        Term("read inputs", bytes=nbytes(tokens * in_features, dt), note=f"tokens·in·{b:g} B"),
        Term("write outputs", bytes=nbytes(tokens * out_features, dt), note=f"tokens·out·{b:g} B"),
        Term("2·tokens·in·out", flops=2.0 * tokens * in_features * out_features, note="multiply-add = 2 FLOP"),
    ]
    if bias:
        items.insert(3, Term("read bias", bytes=nbytes(out_features, dt), note=f"out·{b:g} B"))
        items.append(Term("bias add", flops=1.0 * tokens * out_features, note="1 add per output"))
    shape = {"tokens": tokens, "in_features": in_features, "out_features": out_features} | ({"bias": True} if bias else {})
    return Operator("linear", shape, dt, Cost(tuple(items)), Roof("matmul", dt))


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
    _positive("conv2d", batch=batch, in_channels=in_channels, height=height, width=width,
              out_channels=out_channels, kernel_size=kernel_size, stride=stride, dilation=dilation, groups=groups)
    _non_negative("conv2d", padding=padding)
    if in_channels % groups or out_channels % groups:
        raise LedgerError(f"conv2d: groups={groups} must divide in_channels={in_channels} and out_channels={out_channels}")
    dt = canonical_dtype(dtype)
    b = dtype_bytes(dt)
    span = dilation * (kernel_size - 1) + 1  # receptive field of one output along an axis
    out_h = (height + 2 * padding - span) // stride + 1
    out_w = (width + 2 * padding - span) // stride + 1
    if out_h <= 0 or out_w <= 0:
        raise LedgerError(f"conv2d: a {kernel_size}×{kernel_size} kernel (dilation {dilation}) does not fit a "
                          f"{height}×{width} input with padding {padding}")
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


# --------------------------------------------------------------------------- attention


# Where a causal mask's diagonal sits when seq_q != seq_kv (the two agree when they are equal):
# - UPPER_LEFT, `torch.tril(ones(sq, skv))`, query i sees keys j <= i: torch's `is_causal` ("causal_upper_left ...
#   is equivalent to the is_causal=True argument in scaled_dot_product_attention", PyTorch docs,
#   torch.nn.attention.bias), on the math, CPU flash, memory-efficient (custom_mask_type 1, CausalFromTopLeft) and
#   cuDNN paths;
# - LOWER_RIGHT, `torch.tril(ones(sq, skv), diagonal=skv - sq)`, query i sees keys j <= i + skv - sq: the queries are
#   the newest tokens. FlashAttention ≥ 2.1 ("if seqlen_q != seqlen_k and causal=True, the causal mask is aligned to
#   the bottom right corner", flash-attention README, changelog 2.1), so the CUDA flash kernels torch vendors
#   (aten::_flash_attention_*, _scaled_dot_product_flash_attention, which torch's dispatcher therefore never picks for
#   a non-square is_causal); memory-efficient custom_mask_type 2 (CausalFromBottomRight); engines' prefill with a
#   cached context (vLLM unified attention).
UPPER_LEFT = "upper_left"
LOWER_RIGHT = "lower_right"
CAUSAL_ALIGNS = (UPPER_LEFT, LOWER_RIGHT)


def causal_pairs(sq: int, skv: int, align: str = LOWER_RIGHT) -> int:
    """Unmasked (query, key) pairs of a causal mask over sq queries and skv keys (one batch·head).
    LOWER_RIGHT: Σ_{i<sq} clip(i + 1 + skv - sq, 0, skv) = sq·(skv - sq + 1) + sq·(sq - 1)/2 when skv >= sq
    (sq = 1 decode: every key), skv(skv + 1)/2 when sq > skv (the first sq - skv queries see nothing).
    UPPER_LEFT: Σ_{i<sq} min(i + 1, skv) = sq(sq + 1)/2 when sq <= skv, skv(skv + 1)/2 + (sq - skv)·skv otherwise.
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
    A causal mask counts its visible scores only, its diagonal where `causal_align` says (see causal_pairs)."""
    _positive("attention", batch_heads=batch_heads, sq=sq, skv=skv, d=d)
    dt = canonical_dtype(dtype)
    b = dtype_bytes(dt)
    bh = batch_heads
    scores = causal_pairs(sq, skv, causal_align) if causal else sq * skv
    aligned = f", aligned {causal_align.replace('_', '-')}" if sq != skv else ""
    score_note = f"{scores:,} visible scores per head (causal mask{aligned})" if causal else "sq·skv scores per head"
    items = (
        Term("read Q", bytes=nbytes(bh * sq * d, dt), note=f"bh·sq·d·{b:g} B"),
        Term("read K", bytes=nbytes(bh * skv * d, dt), note=f"bh·skv·d·{b:g} B"),
        Term("read V", bytes=nbytes(bh * skv * d, dt), note=f"bh·skv·d·{b:g} B"),
        Term("write O", bytes=nbytes(bh * sq * d, dt), note=f"bh·sq·d·{b:g} B"),
        Term("QK^T + PV", flops=4.0 * bh * scores * d, note=f"2 matmuls × 2 FLOP per multiply-add; {score_note}"),
        Term("softmax", flops=5.0 * bh * scores + 1.0 * bh * sq * d,
             note="scale, running max, subtract, exp, sum: 5 per score; 1 divide per output element"),
    )
    shape = {"batch_heads": bh, "sq": sq, "skv": skv, "d": d} | causal_shape(sq, skv, causal, causal_align)
    return Operator("attention", shape, dt, Cost(items), Roof("matmul", dt), facts={"scores_per_head": scores})


def _elements(name: str, elements: int, dt: str, note: str = "") -> Term:
    return Term(name, bytes=nbytes(elements, dt), elements=elements, note=note)


@register("attention-traffic", source=SRC_TRAFFIC)
def attention_traffic(
    sq: int, skv: int, d: int, block_m: int = 128, block_n: int = 128, dtype: str = "fp16", batch_heads: int = 1
) -> Operator:
    """Naive three-kernel attention vs tiled online-softmax, in HBM elements moved (per batch_heads pairs)."""
    _positive("attention-traffic", sq=sq, skv=skv, d=d, block_m=block_m, block_n=block_n, batch_heads=batch_heads)
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
    return Operator("attention-traffic", shape, dt, tiled, Roof("matmul", dt), variants={"naive": naive}, facts=facts)


# --------------------------------------------------------------------------- decode


@register("decode", source=SRC_ROOFLINE)
def decode(
    params: float,
    batch: int = 1,
    dtype: str = "bf16",
    compute_dtype: str = "bf16",
    context: int = 0,
    layers: int = 0,
    heads: int = 0,
    kv_heads: int = 0,
    head_dim: int = 0,
    kv_dtype: str = "",
) -> Operator:
    """One decode step of a dense transformer: every weight read once per step, used by the whole batch."""
    _positive("decode", params=params, batch=batch)
    _non_negative("decode", context=context)
    dt = canonical_dtype(dtype)
    cdt = canonical_dtype(compute_dtype)
    b = dtype_bytes(dt)
    items = [
        Term("read weights", bytes=params * b, note=f"N·{b:g} B: read once per step, shared by the batch"),
        Term("2·N·batch", flops=2.0 * params * batch, note="every weight: one multiply-add per generated token"),
    ]
    notes = ["I = 2·N·batch / (N·bytes) = 2·batch/bytes: depends on batch and weight bytes only"]
    facts: dict[str, float] = {"kv_cache_bytes": 0.0}
    shape: dict[str, float | int | str] = {"params": params, "batch": batch}
    if context > 0:
        missing = [n for n, v in (("layers", layers), ("heads", heads), ("head_dim", head_dim)) if v <= 0]
        if missing:
            raise LedgerError(f"decode: --context needs the KV-cache geometry; missing: {', '.join(missing)}")
        kvh = kv_heads or heads
        kdt = canonical_dtype(kv_dtype or dt)
        kb = dtype_bytes(kdt)
        per_token = 2 * layers * kvh * head_dim * kb  # K and V, every layer
        kv_bytes = batch * context * per_token
        scores = batch * layers * heads * context
        items += [
            Term("read KV cache", bytes=kv_bytes, note=f"batch·context·2·layers·kv_heads·head_dim·{kb:g} B"),
            Term("write new K,V", bytes=batch * per_token, note=f"batch·2·layers·kv_heads·head_dim·{kb:g} B"),
            Term("QK^T + PV over the cache", flops=4.0 * scores * head_dim,
                 note="batch·layers·heads·context scores × head_dim × 2 matmuls × 2 FLOP"),
            Term("softmax over the cache", flops=5.0 * scores, note="5 per score (ledger convention)"),
        ]
        facts["kv_cache_bytes"] = float(kv_bytes)
        facts["kv_bytes_per_token"] = float(per_token)
        shape |= {"context": context, "layers": layers, "heads": heads, "kv_heads": kvh, "head_dim": head_dim}
        if kdt != dt:
            shape["kv_dtype"] = kdt
    else:
        notes.append("KV cache ignored (second-order at small context); give --context and the geometry to add it")
    if cdt != "bf16":
        shape["compute_dtype"] = cdt
    return Operator("decode", shape, dt, Cost(tuple(items), tuple(notes)), Roof("matmul", cdt), facts=facts)


# --------------------------------------------------------------------------- norms, softmax, embedding


_WEIGHT_MODES = ("once", "resident", "per-row")


def _weight_term(name: str, mode: str, rows: int, hidden: int, dt: str, formula: str) -> Term:
    b = dtype_bytes(dt)
    if mode == "once":
        return Term(name, bytes=nbytes(hidden, dt), note=f"hidden·{b:g} B: read once (ledger convention)")
    if mode == "resident":
        return Term(name, bytes=0.0, note="0: already resident in L2 from an earlier op (the seed's weight_in_l2)")
    if mode == "per-row":
        return Term(name, bytes=nbytes(rows * hidden, dt), note=f"rows·hidden·{b:g} B: re-read for every row")
    raise LedgerError(f"{formula}: weight must be one of {', '.join(_WEIGHT_MODES)}, got {mode!r}")


@register("rmsnorm", source=SRC_LEDGER)
def rmsnorm(rows: int, hidden: int, dtype: str = "fp16", weight: str = "once") -> Operator:
    """RMSNorm y = x·rsqrt(mean(x²) + eps)·w, one pass over each row; weight once, resident or per row."""
    _positive("rmsnorm", rows=rows, hidden=hidden)
    dt = canonical_dtype(dtype)
    b = dtype_bytes(dt)
    items = (
        Term("read x", bytes=nbytes(rows * hidden, dt), note=f"rows·hidden·{b:g} B"),
        Term("write y", bytes=nbytes(rows * hidden, dt), note=f"rows·hidden·{b:g} B"),
        _weight_term("read w", weight, rows, hidden, dt, "rmsnorm"),
        Term("sum of squares (FMA)", flops=2.0 * rows * hidden, note="2 per element"),
        Term("rsqrt", flops=1.0 * rows, note="1 per row"),
        Term("scale by rsqrt(mean)+eps", flops=2.0 * rows, note="2 per row"),
        Term("multiply by w", flops=2.0 * rows * hidden, note="x·rstd·w: 2 per element"),
    )
    return Operator("rmsnorm", {"rows": rows, "hidden": hidden, "weight": weight}, dt, Cost(items), Roof("simt", "fp32"))


@register("layernorm", source=SRC_LEDGER)
def layernorm(rows: int, hidden: int, dtype: str = "fp16", affine: bool = True, weight: str = "once") -> Operator:
    """LayerNorm y = (x - mean)·rsqrt(var + eps)·γ + β over each row of `hidden` elements."""
    _positive("layernorm", rows=rows, hidden=hidden)
    dt = canonical_dtype(dtype)
    b = dtype_bytes(dt)
    n = rows * hidden
    items = [
        Term("read x", bytes=nbytes(n, dt), note=f"rows·hidden·{b:g} B"),
        Term("write y", bytes=nbytes(n, dt), note=f"rows·hidden·{b:g} B"),
        Term("mean: sum", flops=1.0 * n, note="1 add per element"),
        Term("variance: (x-mean)² accumulate", flops=3.0 * n, note="subtract 1 + FMA 2 per element"),
        Term("per row: 2 divides, +eps, rsqrt", flops=4.0 * rows, note="4 per row"),
        Term("normalize (x-mean)·rstd", flops=2.0 * n, note="2 per element"),
    ]
    if affine:
        items.insert(2, _weight_term("read γ", weight, rows, hidden, dt, "layernorm"))
        items.insert(3, _weight_term("read β", weight, rows, hidden, dt, "layernorm"))
        items.append(Term("affine γ·x̂ + β (FMA)", flops=2.0 * n, note="2 per element"))
    shape = {"rows": rows, "hidden": hidden} | ({"weight": weight} if affine else {"affine": False})
    return Operator("layernorm", shape, dt, Cost(tuple(items)), Roof("simt", "fp32"))


@register("softmax", source=SRC_LEDGER)
def softmax(rows: int, cols: int, dtype: str = "fp16") -> Operator:
    """Row softmax over `cols` elements: max, subtract, exp, sum, divide."""
    _positive("softmax", rows=rows, cols=cols)
    dt = canonical_dtype(dtype)
    b = dtype_bytes(dt)
    items = (
        Term("read x", bytes=nbytes(rows * cols, dt), note=f"rows·cols·{b:g} B"),
        Term("write y", bytes=nbytes(rows * cols, dt), note=f"rows·cols·{b:g} B"),
        Term("max, subtract, exp, sum, divide", flops=5.0 * rows * cols, note="5 per element"),
    )
    return Operator("softmax", {"rows": rows, "cols": cols}, dt, Cost(items), Roof("simt", "fp32"))


@register("embedding", source=SRC_LEDGER)
def embedding(tokens: int, hidden: int, dtype: str = "fp16", index_dtype: str = "int64", unique_tokens: int = 0) -> Operator:
    """Embedding lookup: gather `tokens` rows of `hidden` from a table; no arithmetic."""
    _positive("embedding", tokens=tokens, hidden=hidden)
    _non_negative("embedding", unique_tokens=unique_tokens)
    dt = canonical_dtype(dtype)
    idt = canonical_dtype(index_dtype)
    b = dtype_bytes(dt)
    distinct = unique_tokens or tokens
    if distinct > tokens:
        raise LedgerError(f"embedding: unique_tokens={unique_tokens} exceeds tokens={tokens}")
    note = ("unique_tokens·hidden: each distinct row once" if unique_tokens
            else "tokens·hidden: every token assumed distinct (give --unique-tokens for fewer)")
    items = (
        Term("read indices", bytes=nbytes(tokens, idt), note=f"tokens·{dtype_bytes(idt):g} B ({idt})"),
        Term("read table rows", bytes=nbytes(distinct * hidden, dt), note=f"{note}·{b:g} B"),
        Term("write output", bytes=nbytes(tokens * hidden, dt), note=f"tokens·hidden·{b:g} B"),
    )
    shape = {"tokens": tokens, "hidden": hidden} | ({"unique_tokens": unique_tokens} if unique_tokens else {})
    return Operator("embedding", shape, dt, Cost(items), Roof("simt", "fp32"))


# --------------------------------------------------------------------------- elementwise and fused


@register("elementwise", source=SRC_LEDGER)
def elementwise(n: int, dtype: str = "fp16", chain: str = "cos,sin", fused: bool = True) -> Operator:
    """A chain of unary ops over n elements (default y = sin(cos(x))), fused in one kernel or eager."""
    _positive("elementwise", n=n)
    dt = canonical_dtype(dtype)
    ops = [o.strip() for o in chain.split(",") if o.strip()]
    if not ops:
        raise LedgerError("elementwise: chain must name at least one op, e.g. --chain cos,sin")
    b = dtype_bytes(dt)
    rx = nbytes(n, dt)
    items: list[Term] = []
    if fused:
        items += [
            Term("read x", bytes=rx, note=f"n·{b:g} B"),
            Term("write y", bytes=rx, note=f"n·{b:g} B"),
            Term("+".join(ops), flops=float(len(ops)) * n, note=f"{len(ops)} per element; intermediates stay in registers"),
        ]
    else:
        # Eager: every op is its own kernel, so each intermediate makes a DRAM round trip.
        names = ["x"] + [chr(ord("a") + i) for i in range(len(ops))]
        for i, op in enumerate(ops):
            items += [
                Term(f"read {names[i]}", bytes=rx, note=f"n·{b:g} B"),
                Term(f"write {names[i + 1]}", bytes=rx, note=f"n·{b:g} B"),
                Term(op, flops=1.0 * n, note="1 per element"),
            ]
    shape = {"n": n, "chain": ",".join(ops), "fused": fused}
    return Operator("elementwise", shape, dt, Cost(tuple(items)), Roof("simt", "fp32"))


@register("norm-rope-quant", source=SRC_LEDGER)
def norm_rope_quant(
    tokens: int,
    q_heads: int,
    kv_heads: int,
    head_dim: int,
    in_dtype: str = "bf16",
    out_dtype: str = "fp8",
    rope_table_per_head: bool = False,
) -> Operator:
    """Fused QK-Norm + RoPE + fp8 quantization over the q and k heads of `tokens` tokens."""
    _positive("norm-rope-quant", tokens=tokens, q_heads=q_heads, head_dim=head_dim)
    _non_negative("norm-rope-quant", kv_heads=kv_heads)
    if head_dim % 2:
        raise LedgerError(f"norm-rope-quant: head_dim must be even (RoPE rotates pairs), got {head_dim}")
    idt, odt = canonical_dtype(in_dtype), canonical_dtype(out_dtype)
    heads = q_heads + kv_heads
    rows = tokens * heads
    elems = rows * head_dim
    rope_reads = heads if rope_table_per_head else 1
    items = (
        Term("read q,k", bytes=nbytes(elems, idt), note=f"tokens·(q_heads+kv_heads)·head_dim·{dtype_bytes(idt):g} B"),
        Term("write q8,k8", bytes=nbytes(elems, odt), note=f"same elements at {dtype_bytes(odt):g} B"),
        Term("write per-row scales", bytes=nbytes(rows, "fp32"), note="one fp32 scale per row"),
        Term("read norm weights (q,k)", bytes=nbytes(2 * head_dim, idt), note="resident in cache, counted once"),
        Term("read RoPE table", bytes=rope_reads * nbytes(2 * tokens * head_dim, "fp32"),
             note="cos/sin at fp32, " + (f"re-read by each of the {heads} heads" if rope_table_per_head
                                         else "counted once for the whole layer")),
        Term("norm: sum of squares", flops=2.0 * elems, note="2 per element"),
        Term("norm: rsqrt + 2 scales", flops=3.0 * rows, note="3 per row"),
        Term("norm: multiply by weight", flops=2.0 * elems, note="2 per element"),
        Term("RoPE: 4 mul + 2 add per pair", flops=6.0 * (head_dim // 2) * rows, note="6 per pair of elements"),
        Term("quant: absmax reduction", flops=1.0 * elems, note="1 per element"),
        Term("quant: scale + convert", flops=2.0 * elems, note="2 per element"),
    )
    shape = {"tokens": tokens, "q_heads": q_heads, "kv_heads": kv_heads, "head_dim": head_dim, "out_dtype": odt} | (
        {"rope_table_per_head": True} if rope_table_per_head else {})
    return Operator("norm-rope-quant", shape, idt, Cost(items), Roof("simt", "fp32"))
