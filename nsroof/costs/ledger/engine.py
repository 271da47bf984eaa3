"""Formulas of the inference engines' custom ops (vLLM `_C::`, `_C_cache_ops::`, `vllm::`; SGLang
`sgl_kernel::`), from their recorded arguments in schema order (vllm/csrc/torch_bindings.cpp,
sgl-kernel/csrc/common_extension.cc) plus, where the arguments lack them, the step annotation and the
--model-config (engine_context).

Accounting as everywhere in the ledger: each distinct input read once, each output written once, a basic op or
transcendental 1 FLOP, a multiply-add 2. In-place arguments (`Tensor!`) are written; read only where the op's
arithmetic reads them.
"""

from __future__ import annotations

from nsroof.costs.ledger.core import DTYPE_BYTES, Term
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
    step = _step(context)
    tokens, heads, d = query.shape[0], query.numel // (query.shape[0] * query.shape[-1]), query.shape[-1]
    if tokens != step.tokens:
        raise Missing(f"a step annotation matching this call ({tokens} query tokens, the step has "
                      f"{step.tokens})")
    kv_heads = key.numel // (key.shape[0] * key.shape[-1])
    model: ModelConfig | None = context.model
    window = model.window_of_layer(context.ordinal) if model is not None else None
    pairs = attention_pairs(step, window)
    kv = sum(p.kv_tokens(n) if not window else min(p.kv_tokens(n), p.q + p.requests * (window - 1))
             for n, p in step.phases())
    layer = "" if model is None else (f" (sliding window {window})" if window else " (full causal)")
    return [
        Term("read Q", bytes=query.nbytes), Term("write O", bytes=out_bytes),
        Term("read K, V", bytes=2.0 * kv * kv_heads * d * key.itemsize,
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


# --------------------------------------------------------------------------- mixture of experts

_WEIGHT_BYTES = {"mxfp4": 0.5 + 1 / 32, "nvfp4": 0.5 + 1 / 16}  # 4-bit values + one 8-bit scale per 32 (16)


def _weight_itemsize(model: ModelConfig, fallback: float) -> tuple[float, str]:
    if model.weight_dtype in _WEIGHT_BYTES:
        return _WEIGHT_BYTES[model.weight_dtype], model.weight_dtype
    from nsroof.costs.ledger.core import LedgerError, canonical_dtype

    try:
        dt = canonical_dtype(model.weight_dtype)
    except LedgerError:
        return fallback, "the activations' dtype"
    return DTYPE_BYTES[dt], dt


def moe_terms(tokens: int, hidden: int, ffn: int, experts: int, top_k: int, act_itemsize: float,
              weight_itemsize: float, weight_name: str) -> list[Term]:
    """Gated experts (gate and up projections to ffn, down back to hidden) for `tokens` tokens routed to
    top_k of `experts`: 6·tokens·top_k·hidden·ffn FLOP; each expert's weights read once when touched, the
    expected number touched under uniform routing E·(1 − (1 − k/E)^tokens)."""
    touched = experts * (1.0 - (1.0 - top_k / experts) ** tokens)
    rows = tokens * top_k
    return [
        Term("read x, write y", bytes=2.0 * tokens * hidden * act_itemsize,
             note="tokens·hidden·itemsize each"),
        Term("read expert weights", bytes=touched * 3 * hidden * ffn * weight_itemsize,
             note=f"{touched:.1f} experts touched (expected, uniform routing)·3·hidden·ffn at {weight_name}"),
        Term("gate + up", flops=2.0 * rows * hidden * 2 * ffn, note="2·tokens·top_k·hidden·2ffn"),
        Term("activation·up", flops=5.0 * rows * ffn, note="silu 4 + multiply 1 per ffn element"),
        Term("down", flops=2.0 * rows * ffn * hidden, note="2·tokens·top_k·ffn·hidden"),
        Term("top-k routing + weighted sum", flops=1.0 * tokens * experts + 2.0 * rows * hidden,
             note="1 per router logit; multiply-add per routed output element"),
    ]


@formula("vllm::moe_forward", source=SRC_VLLM + "; experts, top-k, ffn size from --model-config",
         roof="matmul", _user=False)
def moe_forward(hidden_states: Tensor, router_logits: Tensor, *, context: OpContext) -> list[Term]:
    """moe_forward(hidden_states, router_logits, layer_name): the experts' sizes are not arguments, so they
    come from the model config; the ffn is split over the tensor-parallel ranks."""
    model: ModelConfig | None = context.model
    if model is None:
        raise Missing("the model's experts, top-k and expert ffn size (give --model-config CONFIG.json)")
    top_k = model.need("num_experts_per_tok", model.top_k)
    ffn = model.need("intermediate_size", model.moe_intermediate)
    tp = model.tensor_parallel or context.world_size
    if not tp:
        raise Missing("the tensor-parallel size (the trace's distributedInfo, or \"tensor_parallel_size\" in "
                      "the model config)")
    tokens, hidden = hidden_states.shape[0], hidden_states.shape[-1]
    experts = router_logits.shape[-1]
    itemsize, name = _weight_itemsize(model, hidden_states.itemsize)
    return moe_terms(tokens, hidden, -(-ffn // tp), experts, top_k, hidden_states.itemsize, itemsize, name)


def _fused_experts(x: Tensor, w1: Tensor, w2: Tensor, topk_ids: Tensor) -> list[Term]:
    experts, two_ffn = w1.shape[0], w1.shape[1]
    return moe_terms(x.shape[0], x.shape[-1], two_ffn // 2, experts, topk_ids.shape[-1], x.itemsize,
                     w1.itemsize, w1.dtype)


@formula("vllm::outplace_fused_experts", source=SRC_VLLM, roof="matmul", _user=False)
def outplace_fused_experts(x: Tensor, w1: Tensor, w2: Tensor, topk_weights: Tensor,
                           topk_ids: Tensor) -> list[Term]:
    """outplace_fused_experts(hidden_states, w1 [E, 2·ffn, hidden], w2 [E, hidden, ffn], topk_weights,
    topk_ids, …)."""
    return _fused_experts(x, w1, w2, topk_ids)


@formula("vllm::inplace_fused_experts", source=SRC_VLLM, roof="matmul", _user=False)
def inplace_fused_experts(x: Tensor, w1: Tensor, w2: Tensor, topk_weights: Tensor,
                          topk_ids: Tensor) -> list[Term]:
    """inplace_fused_experts(hidden_states!, w1, w2, topk_weights, topk_ids, …)."""
    return _fused_experts(x, w1, w2, topk_ids)


# --------------------------------------------------------------------------- ROCm (AITER, vLLM on ROCm)

SRC_AITER = "ROCm AITER / SGLang op schemas as the traces record them; ledger convention"


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
