"""Formulas of the inference engines' custom ops (vLLM `_C::`, `_C_cache_ops::`, `vllm::`; SGLang
`sgl_kernel::`), from their recorded arguments in schema order (vllm/csrc/torch_bindings.cpp,
sgl-kernel/csrc/common_extension.cc) plus, where the arguments lack them, the step annotation and the
--model-config (engine_context).

Accounting as everywhere in the ledger: each distinct input read once, each output written once, a basic op or
transcendental 1 FLOP, a multiply-add 2. In-place arguments (`Tensor!`) are written; read only where the op's
arithmetic reads them.
"""

from __future__ import annotations

import re

from nsroof.costs.ledger.core import Term
from nsroof.costs.ledger.custom import Missing, OpContext, Tensor, formula
from nsroof.costs.ledger.engine_context import ModelConfig, Step

SRC_VLLM = "vLLM csrc/torch_bindings.cpp op schemas; ledger convention"
SRC_SGLANG = "SGLang sgl-kernel csrc/common_extension.cc op schemas; ledger convention"


def _rows(x: Tensor) -> tuple[int, int]:
    return x.numel // x.shape[-1], x.shape[-1]


def _rms_terms(x: Tensor, w: Tensor, out_bytes: float, residual: Tensor | None = None) -> list[Term]:
    rows, hidden = _rows(x)
    n = rows * hidden
    items = [Term("read x", bytes=x.nbytes, note="rows·hidden·itemsize"),
             Term("read w", bytes=w.nbytes, note="hidden·itemsize, once"),
             Term("write y", bytes=out_bytes, note="rows·hidden·out itemsize"),
             Term("sum of squares, rsqrt, scale", flops=4.0 * n + 3.0 * rows,
                  note="2 + 2 per element, 3 per row")]
    if residual is not None:
        items += [Term("read residual, write x + residual", bytes=2 * residual.nbytes,
                       note="2·rows·hidden·itemsize"),
                  Term("x + residual", flops=1.0 * n, note="1 add per element")]
    return items


@formula("_C::rms_norm", source=SRC_VLLM, _user=False)
def vllm_rms_norm(out: Tensor, x: Tensor, weight: Tensor, epsilon: float | None) -> list[Term]:
    """rms_norm(Tensor! result, Tensor input, Tensor weight, float epsilon)."""
    return _rms_terms(x, weight, out.nbytes)


@formula("_C::fused_add_rms_norm", source=SRC_VLLM, _user=False)
def vllm_fused_add_rms_norm(x: Tensor, residual: Tensor, weight: Tensor, epsilon: float | None) -> list[Term]:
    """fused_add_rms_norm(Tensor! input, Tensor! residual, Tensor weight, float epsilon): residual += input,
    input = rmsnorm(residual)·weight; both written in place."""
    return _rms_terms(x, weight, x.nbytes, residual)


@formula("sgl_kernel::rmsnorm", source=SRC_SGLANG, _user=False)
def sgl_rmsnorm(out: Tensor, x: Tensor, weight: Tensor, eps: float | None) -> list[Term]:
    """rmsnorm(Tensor! output, Tensor input, Tensor weight, float eps, bool enable_pdl)."""
    return _rms_terms(x, weight, out.nbytes)


@formula("sgl_kernel::fused_add_rmsnorm", source=SRC_SGLANG, _user=False)
def sgl_fused_add_rmsnorm(x: Tensor, residual: Tensor, weight: Tensor, eps: float | None) -> list[Term]:
    """fused_add_rmsnorm(Tensor! input, Tensor! residual, Tensor weight, float eps, bool enable_pdl)."""
    return _rms_terms(x, weight, x.nbytes, residual)


def _rope_terms(positions: Tensor, query: Tensor, key: Tensor | None, head_size: int,
                cache: Tensor) -> list[Term]:
    rot = cache.shape[-1]  # rotary dim: cos and sin halves of the cache row
    tokens = positions.numel
    rotated = (query.numel + (key.numel if key is not None else 0)) // head_size * rot
    qk_bytes = query.nbytes + (key.nbytes if key is not None else 0)
    return [Term("read q, k", bytes=qk_bytes, note="in place: read"),
            Term("write q, k", bytes=qk_bytes, note="written"),
            Term("read positions", bytes=positions.nbytes),
            Term("read cos/sin rows", bytes=tokens * rot * cache.itemsize, note="tokens·rot_dim·itemsize"),
            Term("rotate pairs", flops=3.0 * rotated, note="4 mul + 2 add per pair = 3 per rotated element")]


@formula("_C::rotary_embedding", source=SRC_VLLM, _user=False)
def vllm_rotary(positions: Tensor, query: Tensor, key: Tensor | None, head_size: int, cache: Tensor,
                is_neox: bool | None) -> list[Term]:
    """rotary_embedding(Tensor positions, Tensor! query, Tensor!? key, int head_size, Tensor cos_sin_cache,
    bool is_neox)."""
    return _rope_terms(positions, query, key, head_size, cache)


@formula("sgl_kernel::rotary_embedding", source=SRC_SGLANG, _user=False)
def sgl_rotary(positions: Tensor, query: Tensor, key: Tensor | None, head_size: int, cache: Tensor,
               is_neox: bool | None) -> list[Term]:
    """rotary_embedding(positions, query, key, head_size, cos_sin_cache, is_neox), as vLLM's."""
    return _rope_terms(positions, query, key, head_size, cache)


def _act_and_mul(out: Tensor, x: Tensor, flops: float, what: str) -> list[Term]:
    return [Term("read x", bytes=x.nbytes, note="tokens·2d·itemsize"), Term("write y", bytes=out.nbytes),
            Term(what, flops=flops * out.numel, note=f"{flops:g} per output element")]


for _name, _flops, _what in (("silu_and_mul", 5.0, "silu(a)·b: silu 4 + 1 multiply"),
                             ("gelu_and_mul", 6.0, "gelu(a)·b: gelu 5 + 1 multiply"),
                             ("gelu_tanh_and_mul", 6.0, "gelu_tanh(a)·b: 5 + 1 multiply")):
    for _ns, _src in (("_C", SRC_VLLM), ("sgl_kernel", SRC_SGLANG)):
        def _make(flops: float = _flops, what: str = _what):  # type: ignore[no-untyped-def]
            def act(out: Tensor, x: Tensor) -> list[Term]:
                return _act_and_mul(out, x, flops, what)
            return act
        formula(f"{_ns}::{_name}", source=_src, _user=False)(_make())


@formula("_C::static_scaled_fp8_quant", source=SRC_VLLM, _user=False)
def static_fp8_quant(out: Tensor, x: Tensor, scale: Tensor) -> list[Term]:
    """static_scaled_fp8_quant(Tensor! result, Tensor input, Tensor scale): y = fp8(x / scale)."""
    return [Term("read x", bytes=x.nbytes), Term("read scale", bytes=scale.nbytes),
            Term("write fp8", bytes=out.nbytes),
            Term("scale + convert", flops=2.0 * x.numel, note="2 per element")]


@formula("_C::dynamic_scaled_fp8_quant", source=SRC_VLLM, _user=False)
def dynamic_fp8_quant(out: Tensor, x: Tensor, scale: Tensor) -> list[Term]:
    """dynamic_scaled_fp8_quant(Tensor! result, Tensor input, Tensor! scale): absmax, then scale + convert."""
    return [Term("read x", bytes=x.nbytes), Term("write scale", bytes=scale.nbytes),
            Term("write fp8", bytes=out.nbytes),
            Term("absmax + scale + convert", flops=3.0 * x.numel, note="3 per element")]


@formula("_C::dynamic_per_token_scaled_fp8_quant", source=SRC_VLLM, _user=False)
def per_token_fp8_quant(out: Tensor, x: Tensor, scale: Tensor, scale_ub: Tensor | None) -> list[Term]:
    """dynamic_per_token_scaled_fp8_quant(Tensor! result, Tensor input, Tensor! scale, Tensor? scale_ub)."""
    return list(dynamic_fp8_quant(out, x, scale))


def _cache_terms(key: Tensor, value: Tensor, key_cache: Tensor, slots: Tensor) -> list[Term]:
    written = key.numel + value.numel
    return [Term("read k, v", bytes=key.nbytes + value.nbytes), Term("read slot mapping", bytes=slots.nbytes),
            Term("write cache slots", bytes=written * key_cache.itemsize,
                 note="tokens·kv_heads·head_dim·2 at the cache's itemsize"),
            Term("convert", flops=(1.0 * written) if key_cache.itemsize < key.itemsize else 0.0,
                 note="1 per element when the cache is narrower (fp8)")]


@formula("_C_cache_ops::reshape_and_cache_flash", source=SRC_VLLM, _user=False)
def reshape_and_cache_flash(key: Tensor, value: Tensor, key_cache: Tensor, value_cache: Tensor,
                            slots: Tensor) -> list[Term]:
    """reshape_and_cache_flash(key, value, key_cache!, value_cache!, slot_mapping, kv_cache_dtype, k_scale,
    v_scale): each new token's K and V written into its cache slot."""
    return _cache_terms(key, value, key_cache, slots)


@formula("_C_cache_ops::reshape_and_cache", source=SRC_VLLM, _user=False)
def reshape_and_cache(key: Tensor, value: Tensor, key_cache: Tensor, value_cache: Tensor,
                      slots: Tensor) -> list[Term]:
    """reshape_and_cache(key, value, key_cache!, value_cache!, slot_mapping, kv_cache_dtype, k_scale,
    v_scale)."""
    return _cache_terms(key, value, key_cache, slots)


# --------------------------------------------------------------------------- attention from step annotations


def _step(context: OpContext) -> Step:
    if context.step is None:
        raise Missing("the engine's step annotation (execute_context_…_generation_…) enclosing the call")
    return context.step


def attention_pairs(step: Step, window: int | None) -> int:
    """Visible (query, key) pairs of one layer's attention over the step: causal, within `window` if any."""
    total = 0
    for name, phase in step.phases():
        total += phase.window_pairs(window, name) if window else phase.causal_pairs(name)
    return total


def _unified_attention(query: Tensor, key: Tensor, out_bytes: float, context: OpContext) -> list[Term]:
    kv_heads = key.numel // (key.shape[0] * key.shape[-1])
    return step_attention(query, kv_heads, key.itemsize, out_bytes, context)


def step_attention(query: Tensor, kv_heads: int, kv_itemsize: float, out_bytes: float,
                   context: OpContext) -> list[Term]:
    """One layer's attention over the step the annotation describes: query [tokens, heads, d], the keys and
    values at kv_heads heads of kv_itemsize bytes (a paged cache's, read once per visible token)."""
    step = _step(context)
    tokens, heads, d = query.shape[0], query.numel // (query.shape[0] * query.shape[-1]), query.shape[-1]
    if tokens != step.tokens:
        raise Missing(f"a step annotation matching this call ({tokens} query tokens, the step has "
                      f"{step.tokens})")
    model: ModelConfig | None = context.model
    window = model.window_of_layer(context.ordinal) if model is not None else None
    pairs = attention_pairs(step, window)
    kv = sum(p.kv_tokens(n) if not window else min(p.kv_tokens(n), p.q + p.requests * (window - 1))
             for n, p in step.phases())
    layer = "" if model is None else (f" (sliding window {window})" if window else " (full causal)")
    return [
        Term("read Q", bytes=query.nbytes), Term("write O", bytes=out_bytes),
        Term("read K, V", bytes=2.0 * kv * kv_heads * d * kv_itemsize,
             note=f"{kv:,} kv tokens·kv_heads·head_dim·2 at the key's itemsize"),
        Term("QK^T + PV", flops=4.0 * heads * pairs * d, note=f"{pairs:,} visible pairs per head{layer}"),
        Term("softmax", flops=5.0 * heads * pairs + 1.0 * tokens * heads * d,
             note="5 per score + 1 per output"),
    ]


@formula("vllm::unified_attention_with_output", source=SRC_VLLM + "; Σ q·kv from the step annotation",
         roof="matmul", _user=False)
def unified_attention_with_output(query: Tensor, key: Tensor, value: Tensor, output: Tensor, *,
                                  context: OpContext) -> list[Term]:
    """unified_attention_with_output(query, key, value, output!, layer_name, …): the pairs from the step."""
    return _unified_attention(query, key, output.nbytes, context)


@formula("vllm::unified_attention", source=SRC_VLLM + "; Σ q·kv from the step annotation", roof="matmul",
         _user=False)
def unified_attention(query: Tensor, key: Tensor, value: Tensor, *, context: OpContext) -> list[Term]:
    """unified_attention(query, key, value, layer_name) -> output (query's shape and dtype)."""
    return _unified_attention(query, key, query.nbytes, context)


# mixture of experts: nsroof.costs.ledger.engine_moe


# --------------------------------------------------------------------------- ROCm (AITER, vLLM on ROCm)

SRC_AITER = "ROCm AITER / SGLang op schemas as the traces record them; ledger convention"
SRC_AITER_OPS = "ROCm aiter aiter/ops/rmsnorm.py op signatures; ledger convention"


@formula("aiter::rmsnorm", source=SRC_AITER, _user=False)
def aiter_rmsnorm(out: Tensor, x: Tensor, weight: Tensor, eps: float | None) -> list[Term]:
    """rmsnorm(Tensor! out, Tensor input, Tensor weight, float epsilon)."""
    return _rms_terms(x, weight, out.nbytes)


@formula("aiter::add_rmsnorm", source=SRC_AITER, _user=False)
def aiter_add_rmsnorm(out: Tensor, x: Tensor, residual_in: Tensor, residual_out: Tensor, weight: Tensor,
                      eps: float | None) -> list[Term]:
    """add_rmsnorm(Tensor! out, Tensor input, Tensor residual_in, Tensor! residual_out, Tensor weight, float
    epsilon): residual_out = input + residual_in, out = rmsnorm(residual_out)·weight."""
    return _rms_terms(x, weight, out.nbytes, residual_in)


def _gemm_terms(x: Tensor, weight: Tensor, bias: Tensor | None) -> list[Term]:
    rows, k = _rows(x)
    n = weight.shape[0]
    items = [Term("read A", bytes=x.nbytes), Term("read W", bytes=weight.nbytes),
             Term("write C", bytes=rows * n * x.itemsize, note="rows·n at the input's itemsize"),
             Term("2·m·n·k", flops=2.0 * rows * n * k, note="y = x·Wᵀ")]
    if bias is not None:
        items += [Term("read bias", bytes=bias.nbytes), Term("bias add", flops=1.0 * rows * n)]
    return items


@formula("aiter::gemm_a16w16", source=SRC_AITER, roof="matmul", _user=False)
def aiter_gemm(x: Tensor, weight: Tensor, bias: Tensor | None) -> list[Term]:
    """gemm_a16w16(Tensor A [m, k], Tensor W [n, k], Tensor? bias, …): y = A·Wᵀ."""
    return _gemm_terms(x, weight, bias)


@formula("vllm::rocm_unquantized_gemm", source=SRC_VLLM, roof="matmul", _user=False)
def rocm_unquantized_gemm(x: Tensor, weight: Tensor, bias: Tensor | None) -> list[Term]:
    """rocm_unquantized_gemm(Tensor x, Tensor weight [n, k], Tensor? bias): y = x·Wᵀ (+ bias)."""
    return _gemm_terms(x, weight, bias)


@formula("sglang::store_cache", source=SRC_SGLANG, _user=False)
def sglang_store_cache(key: Tensor, value: Tensor, key_cache: Tensor, value_cache: Tensor,
                       slots: Tensor) -> list[Term]:
    """store_cache(k, v, k_cache!, v_cache!, indices, …): each new token's K and V into its cache slot."""
    return _cache_terms(key, value, key_cache, slots)


@formula("aiter::rms_norm", source=SRC_AITER_OPS, _user=False)
def aiter_rms_norm(x: Tensor, weight: Tensor, eps: float | None) -> list[Term]:
    """rms_norm(Tensor input, Tensor weight, float epsilon, int use_model_sensitive_rmsnorm) -> Tensor (the
    input's shape and dtype)."""
    return _rms_terms(x, weight, x.nbytes)


@formula("aiter::rmsnorm2d_fwd", source=SRC_AITER_OPS, _user=False)
def aiter_rmsnorm2d_fwd(x: Tensor, weight: Tensor, eps: float | None) -> list[Term]:
    """rmsnorm2d_fwd(Tensor input, Tensor weight, float epsilon, int use_model_sensitive_rmsnorm)."""
    return _rms_terms(x, weight, x.nbytes)


@formula("aiter::rmsnorm2d_fwd_ck", source=SRC_AITER_OPS, _user=False)
def aiter_rmsnorm2d_fwd_ck(x: Tensor, weight: Tensor, eps: float | None) -> list[Term]:
    """rmsnorm2d_fwd_ck(Tensor input, Tensor weight, float epsilon, int use_model_sensitive_rmsnorm)."""
    return _rms_terms(x, weight, x.nbytes)


def _rms_with_add(out: Tensor, x: Tensor, residual_in: Tensor, residual_out: Tensor,
                  weight: Tensor) -> list[Term]:
    return _rms_terms(x, weight, out.nbytes, residual_in)


for _name in ("rmsnorm2d_fwd_with_add", "rmsnorm2d_fwd_with_add_ck"):
    formula(f"aiter::{_name}", source=SRC_AITER_OPS, _user=False)(_rms_with_add)


@formula("aiter::_groupnorm_run", source=SRC_AITER_OPS + "; aiter/ops/groupnorm.py", _user=False)
def aiter_groupnorm(first: Tensor, groups_old: int | None, x_new: Tensor | None, groups_new: int | None,
                    weight_new: Tensor | None = None) -> list[Term]:
    """_groupnorm_run(input, num_groups, weight, bias, eps) -> Tensor (aiter until 2025), or
    _groupnorm_run(y!, workspace!, input, num_groups, weight, bias, eps) (caller-allocated output): a
    layernorm over each (sample, group) of C/G·spatial elements, then γ·x̂ + β per channel."""
    from nsroof.costs.ledger.registry import operator

    x, groups = (first, groups_old) if groups_old is not None else (x_new, groups_new)
    if x is None or groups is None or len(x.shape) < 2:
        raise Missing("aiter::_groupnorm_run: the input and num_groups (not recorded in either of its "
                      "signatures)")
    n, ch = x.shape[0], x.shape[1]
    spatial = x.numel // (n * ch)
    norm = operator("layernorm", rows=n * groups, hidden=ch // groups * spatial, dtype=x.dtype, affine=False)
    return [*norm.cost.terms, Term("read γ, β", bytes=2.0 * ch * x.itemsize, note="2·channels·itemsize"),
            Term("γ·x̂ + β", flops=2.0 * x.numel, note="2 per element")]


def _paged_kv_heads(cache: Tensor) -> int:
    """A paged cache [blocks, page, heads, d] (NHD) or [blocks, heads, page, d] (HND): its heads, told
    apart only where one of the two is 1 (SGLang's aiter backend pages one token)."""
    if len(cache.shape) == 3:
        return cache.shape[1]
    a, b = cache.shape[1], cache.shape[2]
    if len(cache.shape) != 4 or min(a, b) != 1:
        raise Missing(f"the KV cache layout (heads or page size first in key_cache {list(cache.shape)})")
    return max(a, b)


@formula("sglang_profiler::attention_paged_attention_ragged", roof="matmul", _user=False,
         source="ROCm aiter csrc/include/attention_ragged.h paged_attention_ragged, as TraceLens's "
                "kernel_shape_profiler records it for SGLang (its tensor arguments); Σ kv from the step "
                "annotation")
def sglang_paged_attention_ragged(out: Tensor, workspace: Tensor, query: Tensor, key_cache: Tensor,
                                  value_cache: Tensor, kv_indptr: Tensor, *,
                                  context: OpContext) -> list[Term]:
    """paged_attention_ragged(out! [seqs, heads, d], workspace!, query [seqs, heads, d], key_cache,
    value_cache, kv_indptr [seqs + 1], kv_page_indices, kv_last_page_lens, alibi_slopes, k_scale, v_scale,
    fp8_out_scale): one query token per sequence over its pages; the kv lengths are values of kv_indptr, not
    shapes (kv_page_indices is the pool's capacity), so they come from the step annotation."""
    return step_attention(query, _paged_kv_heads(key_cache), key_cache.itemsize, out.nbytes, context)


def _prefill_pairs(q: int, kv: int, requests: int, causal: bool, window: int, context: OpContext) -> int:
    if context.step is not None and context.step.context.q == q and context.step.generation.q == 0:
        phase = context.step.context
        if window > 0:
            return phase.window_pairs(window + 1, "context")
        if causal:
            return phase.causal_pairs("context")
        if phase.q_kv is None:
            raise Missing("Σ q·kv of the step's context requests (the step annotation gives only token "
                          "counts)")
        return phase.q_kv
    if requests != 1:
        raise Missing(f"the per-request query and key lengths of the {requests} requests (values of "
                      "cu_seqlens_q / kv_indptr, which the trace does not record; the engine's step "
                      "annotation gives Σ q·kv)")
    if window > 0:  # keys i − window … i of the query at absolute position kv − q + i
        return sum(min(kv - q + i + 1, window + 1) for i in range(q)) if causal else q * min(kv, window + 1)
    return q * kv - q * (q - 1) // 2 if causal else q * kv


def _prefill_terms(q: Tensor, v: Tensor, kv: int, kv_heads: int, kv_itemsize: float, pairs: int, causal: bool,
                   window: int) -> list[Term]:
    tokens, heads, d, dv = q.shape[0], q.shape[1], q.shape[-1], v.shape[-1]
    mask = ("causal" if causal else "full") + (f", window {window}" if window else "")
    return [
        Term("read Q", bytes=q.nbytes), Term("write O", bytes=tokens * heads * dv * q.itemsize),
        Term("read K, V", bytes=kv * kv_heads * (d + dv) * kv_itemsize,
             note=f"{kv:,} kv tokens·kv_heads·(d + dv) at the keys' itemsize"),
        Term("QK^T + PV", flops=2.0 * heads * pairs * (d + dv),
             note=f"{pairs:,} visible pairs per head ({mask})"),
        Term("softmax", flops=5.0 * heads * pairs + 1.0 * tokens * heads * dv,
             note="5 per score + 1 per output"),
    ]


@formula("aiter::mha_batch_prefill", roof="matmul", _user=False,
         source="ROCm aiter aiter/ops/mha.py mha_batch_prefill; ledger convention")
def aiter_mha_batch_prefill(q: Tensor, k: Tensor, v: Tensor, cu_seqlens_q: Tensor, kv_indptr: Tensor,
                            kv_page_indices: Tensor, max_seqlen_q: int | None, max_seqlen_k: int | None,
                            dropout_p: float | None, softmax_scale: float | None,
                            logits_soft_cap: float | None, zero_tensors: bool | None, is_causal: str | None,
                            window_size_left: str | None, *, context: OpContext) -> list[Term]:
    """mha_batch_prefill(q [Σq, heads, d], k, v (paged [pages, page, kv_heads, d] or [slots, kv_heads, d]),
    cu_seqlens_q [B + 1], kv_indptr [B + 1], kv_page_indices [pages], max_seqlen_q, max_seqlen_k, dropout_p,
    softmax_scale, logits_soft_cap, zero_tensors, is_causal, window_size_left, window_size_right, …): ragged
    prefill over a paged KV cache; Σ kv = pages · page size (the pages the batch holds)."""
    # read as text: aiter's signatures differ by release, and a value of another type at these places is
    # another signature's argument, not a flag to coerce
    if is_causal not in ("True", "False") or not re.fullmatch(r"-?\d+", window_size_left or ""):
        raise Missing("aiter::mha_batch_prefill: is_causal and window_size_left (arguments #12, #13 of "
                      f"aiter/ops/mha.py's signature; recorded {is_causal!r}, {window_size_left!r})")
    causal, left = is_causal == "True", int(str(window_size_left))
    tokens = q.shape[0]
    page = k.shape[1] if len(k.shape) == 4 else 1
    kv_heads = k.shape[-2]
    kv = kv_page_indices.numel * page
    requests = cu_seqlens_q.shape[0] - 1
    window = max(left, 0)
    pairs = _prefill_pairs(tokens, kv, requests, causal, window, context)
    return _prefill_terms(q, v, kv, kv_heads, k.itemsize, pairs, causal, window)


# aiter's mha_varlen_fwd by release (aiter/ops/mha.py): where is_causal and window_size_left sit
_VARLEN_LAYOUTS = ((10, 11),  # (…, max_seqlen_q, max_seqlen_k, dropout_p, softmax_scale, zero_tensors, …)
                   (12, 13))  # (…, max_seqlen_k, min_seqlen_q, dropout_p, softmax_scale, logits_soft_cap, …)


@formula("aiter::mha_varlen_fwd", roof="matmul", _user=False,
         source="ROCm aiter aiter/ops/mha.py mha_varlen_fwd (both argument layouts); ledger convention")
def aiter_mha_varlen_fwd(q: Tensor, k: Tensor, v: Tensor, cu_seqlens_q: Tensor, a4: str | None = None,
                         a5: str | None = None, a6: str | None = None, a7: str | None = None,
                         a8: str | None = None, a9: str | None = None, a10: str | None = None,
                         a11: str | None = None, a12: str | None = None, a13: str | None = None, *,
                         context: OpContext) -> list[Term]:
    """mha_varlen_fwd(q [Σq, heads, d], k [Σkv, kv_heads, d], v, cu_seqlens_q [B + 1], cu_seqlens_k, …,
    is_causal, window_size_left, …): varlen prefill over packed keys (Σkv = k's rows)."""
    args = {10: a10, 11: a11, 12: a12, 13: a13}
    layout = next(((c, w) for c, w in _VARLEN_LAYOUTS if args[c] in ("True", "False")
                   and re.fullmatch(r"-?\d+", args[w] or "")), None)
    if layout is None or len(k.shape) != 3:
        raise Missing("aiter::mha_varlen_fwd: is_causal and window_size_left at either release's places, "
                      "over packed (not paged) keys")
    causal, window = args[layout[0]] == "True", max(int(str(args[layout[1]])), 0)
    tokens, kv, kv_heads = q.shape[0], k.shape[0], k.shape[1]
    pairs = _prefill_pairs(tokens, kv, cu_seqlens_q.shape[0] - 1, causal, window, context)
    return _prefill_terms(q, v, kv, kv_heads, k.itemsize, pairs, causal, window)
