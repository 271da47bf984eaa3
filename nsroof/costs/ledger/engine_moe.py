"""Mixture-of-experts ops of the inference engines, their sizes read from the trace.

A fused-MoE call's cost needs the experts E, the top-k, the hidden size H and each expert's FFN width F. The
engines record them in different places, all read here (`moe_facts`), each fact with where it came from:

  experts   the router logits' last dim (vllm::moe_forward's router_logits [T, E]), else the expert weight
            stacks' first dim;
  top-k     a [T, k] routing tensor: topk_ids/topk_weights as arguments (vllm/sglang fused_experts, aiter
            fused_moe_), or recorded inside the call (the [T, k] ids/weights a router allocates, the triton
            kernels' `TopK`/`SortTokens` arguments, _moe_C::topk_softmax's outputs);
  FFN       the expert weight stacks, w1/w13 [E, 2F, H] and w2 [E, H, F] (vLLM/SGLang/aiter: arguments;
            vLLM's gpt-oss path on triton_kernels: views of [E, K, N] stacks recorded inside moe_forward,
            4-bit values two to a byte along K), F = the larger non-hidden dim / 2 for gated experts; else the
            routed-token buffers the call allocates ([R, F] with R ≥ T·k routed rows: flashinfer's trtllm-gen
            MoE on Blackwell allocates its activation output so);
  weights   4-bit when a kernel under the call names MXFP4/E2M1 or the stacks pack two values a byte, else the
            stacks' dtype, else the --model-config's quantization.

Sources (the public signatures):
  vLLM vllm/model_executor/layers/fused_moe/layer.py: moe_forward(hidden_states, router_logits, layer_name);
  fused_moe.py: inplace/outplace_fused_experts(hidden_states, w1, w2, topk_weights, topk_ids, …);
  csrc/moe/torch_bindings.cpp: topk_softmax(topk_weights!, topk_indices!, token_expert_indices!,
  gating_output,
  renormalize); SGLang python/sglang/srt/layers/moe/fused_moe_triton/fused_moe.py: the same fused_experts;
  ROCm aiter aiter/fused_moe.py: fused_moe_(hidden_states, w1, w2, topk_weight, topk_ids, …);
  flashinfer csrc/trtllm_fused_moe_kernel_launcher.cu: the routed buffers of its trtllm-gen MoE.

`--model-config` overrides each fact it holds and cross-checks it: a value the trace contradicts is a warning
naming both (OpContext.warnings).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from nsroof.costs.ledger.core import DTYPE_BYTES, LedgerError, Term, canonical_dtype
from nsroof.costs.ledger.custom import Call, Missing, OpContext, Tensor, formula
from nsroof.costs.ledger.engine_context import ModelConfig

SRC_MOE = ("vLLM fused_moe/layer.py + fused_moe.py, SGLang fused_moe_triton/fused_moe.py, ROCm aiter "
           "fused_moe.py op signatures; sizes from the trace (nsroof.costs.ledger.engine_moe); ledger "
           "convention")

_WEIGHT_BYTES = {"mxfp4": 0.5 + 1 / 32, "nvfp4": 0.5 + 1 / 16}  # 4-bit values + one 8-bit scale per 32 (16)
_FP4_KERNEL = re.compile(r"mxfp4|e2m1", re.IGNORECASE)
_ALLOCATIONS = frozenset({"aten::empty", "aten::empty_strided", "aten::new_empty", "aten::zeros"})
# torch.ScalarType codes of the integer dtypes (c10/core/ScalarType.h): uint8, int8, int16, int32, int64,
# uint16, uint32, uint64; uint8 also holds packed 4-bit and fp8 values
_INT_CODES = frozenset({0, 1, 2, 3, 4, 27, 28, 29})
_INT_TYPES = frozenset({"int", "long int", "short int", "unsigned int", "signed char", "unsigned char"})
_PACKED_TYPES = frozenset({"unsigned char", "signed char"})
# views pass a tensor on unchanged or re-shaped (a [T, k] slice of a [T, E] bitmatrix is no routing tensor)
_VIEWS = frozenset({"view", "reshape", "slice", "select", "as_strided", "transpose", "permute", "t", "narrow",
                    "unsqueeze", "squeeze", "expand", "flatten", "unflatten", "_reshape_alias", "alias",
                    "detach", "_unsafe_view"})


@dataclass
class MoeFacts:
    """What one fused-MoE call computes; None where neither the trace nor the model config says."""

    tokens: int
    hidden: int
    experts: int | None = None
    top_k: int | None = None
    ffn: int | None = None
    weight_itemsize: float | None = None
    weight_name: str = ""
    source: dict[str, str] = field(default_factory=dict)  # fact -> where it came from

    def need(self, op: str) -> tuple[int, int, int, float]:
        absent = [name for name, value in (("experts", self.experts), ("top-k", self.top_k),
                                           ("expert FFN width", self.ffn),
                                           ("expert weight dtype", self.weight_itemsize)) if value is None]
        if absent:
            raise Missing(f"the MoE's {', '.join(absent)} (not recorded in or under {op}: give "
                          "--model-config CONFIG.json)")
        assert self.experts and self.top_k and self.ffn and self.weight_itemsize
        return self.experts, self.top_k, self.ffn, self.weight_itemsize


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


# --------------------------------------------------------------------------- facts from the trace


def _int_tensor(shape: Any, dtype: Any) -> bool:
    return str(dtype) in _INT_TYPES and isinstance(shape, list | tuple)


def _allocated(call: Call) -> tuple[list[int], int | None] | None:
    """The size and dtype code an allocation records (aten::empty(size, dtype, …)), None for other calls."""
    if call.name.split(".", 1)[0] not in _ALLOCATIONS or not call.concrete:
        return None
    size = call.concrete[0]
    if not isinstance(size, list) or not all(isinstance(x, int) for x in size):
        return None
    code = call.concrete[1] if len(call.concrete) > 1 and isinstance(call.concrete[1], int) else None
    return size, code


def _top_k_candidates(tokens: int, experts: int | None, inside: Iterable[Call]) -> set[int]:
    """k of every [T, k] integer tensor (routing ids) recorded inside the call, T its token count."""
    found: set[int] = set()

    def add(shape: Sequence[Any]) -> None:
        if len(shape) == 2 and shape[0] == tokens and isinstance(shape[1], int) and 0 < shape[1] \
                and (experts is None or shape[1] < experts):
            found.add(int(shape[1]))

    for call in inside:
        allocation = _allocated(call)
        if allocation is not None:
            if allocation[1] in _INT_CODES:
                add(allocation[0])
            continue
        if call.name.startswith("aten::") and call.name[6:].split(".", 1)[0] in _VIEWS:
            continue
        for shape, dtype in zip(call.shapes, call.dtypes, strict=False):
            if _int_tensor(shape, dtype):
                add(shape)
    return found


@dataclass(frozen=True)
class _Stack:
    shape: tuple[int, int, int]
    packed: bool  # two 4-bit values a byte


def _stacks(hidden: int, experts: int | None, tensors: Iterable[tuple[Any, Any]]) -> list[_Stack]:
    """The distinct expert weight stacks among (shape, dtype) pairs: 3-D, the first dim the experts (or a
    divisor of them: the experts local to this rank), one other dim the hidden size (half of it when 4-bit
    values are packed two a byte)."""
    out: dict[tuple[int, int, int], _Stack] = {}
    for shape, dtype in tensors:
        if not isinstance(shape, list | tuple) or len(shape) != 3 \
                or not all(isinstance(x, int) for x in shape):
            continue
        e, a, b = (int(x) for x in shape)
        if experts is not None and (e <= 0 or experts % e or e == 1):
            continue
        packed = str(dtype) in _PACKED_TYPES
        if hidden in (a, b) or (packed and hidden // 2 in (a, b) and hidden % 2 == 0):
            out[(e, a, b)] = _Stack((e, a, b), packed)
    return list(out.values())


def _ffn_from_stacks(hidden: int, stacks: list[_Stack]) -> int | None:
    """F from gate/up [E, 2F, ·] and down [E, ·, F] stacks: the larger non-hidden dim is 2F (the down
    stack's F may be packed, halving it); equal dims are ungated experts (F)."""
    others = []
    for s in stacks:
        _, a, b = s.shape
        h = (hidden // 2) if s.packed and hidden // 2 in (a, b) and hidden not in (a, b) else hidden
        others.append(b if a == h else a)
    if len(set(others)) != 2 and len(stacks) != 2:
        return None
    big, small = max(others), min(others)
    if big == small:
        return big
    return big // 2 if big in (2 * small, 4 * small) and big % 2 == 0 else None


def _ffn_from_buffers(tokens: int, top_k: int, hidden: int, inside: Iterable[Call]) -> int | None:
    """F from the routed-token buffers a call allocates ([R, c] with R ≥ T·k rows, or [T, k, c]), c not the
    hidden size: one width is F; two widths c and 2c are the gate/up output (2F) and the activation's (F)."""
    widths: set[int] = set()
    routed = tokens * top_k
    for call in inside:
        allocation = _allocated(call)
        if allocation is None:
            continue
        size = allocation[0]
        if len(size) == 2 and routed <= size[0] and size[0] != tokens:
            c = size[1]
        elif len(size) == 3 and size[:2] == [tokens, top_k]:
            c = size[2]
        else:
            continue
        if c not in (hidden, hidden // 2) and c > 0:
            widths.add(c)
    if len(widths) == 1:
        return widths.pop()
    if len(widths) == 2 and max(widths) == 2 * min(widths):
        return min(widths)
    return None


def moe_facts(x: Tensor, experts: int | None, context: OpContext, *, stacks: Sequence[Tensor] = (),
              routing: Tensor | None = None) -> MoeFacts:
    """What the trace says about a fused-MoE call with hidden states `x` [T, H]: `experts` where the call's
    arguments give them (router logits), `stacks` its expert weight arguments, `routing` its [T, k] topk ids;
    otherwise read from the calls and kernels recorded inside it (context.inside, context.kernels)."""
    tokens, hidden = x.shape[0], x.shape[-1]
    facts = MoeFacts(tokens, hidden)
    # a uint8 weight argument (ledger dtype int8) holds 4-bit values two a byte
    found = _stacks(hidden, experts, [(list(s.shape), "unsigned char" if s.dtype == "int8" else s.dtype)
                                      for s in stacks])
    where = "the call's weight arguments"
    for calls, whose in ((context.inside, "the call"), (context.peer_inside, "another call of the op with "
                                                                        "the same arguments")):
        if found:
            break
        found = _stacks(hidden, experts, ((sh, dt) for c in calls
                                          for sh, dt in zip(c.shapes, c.dtypes, strict=False)))
        where = f"the expert weight stacks recorded inside {whose}"
    if experts is not None:
        facts.experts, facts.source["experts"] = experts, "the router logits' last dim"
    elif found:
        facts.experts, facts.source["experts"] = found[0].shape[0], where
    if routing is not None and len(routing.shape) == 2:
        facts.top_k, facts.source["top_k"] = routing.shape[-1], "the topk ids' last dim"
    else:
        ks = _top_k_candidates(tokens, facts.experts, context.inside) \
            or _top_k_candidates(tokens, facts.experts, context.peer_inside)
        if len(ks) == 1:
            facts.top_k, facts.source["top_k"] = ks.pop(), "the [tokens, k] routing tensors inside the call"
    if found and (ffn := _ffn_from_stacks(hidden, found)):
        facts.ffn, facts.source["ffn"] = ffn, where
    elif facts.top_k and (ffn := _ffn_from_buffers(tokens, facts.top_k, hidden, context.inside)
                          or _ffn_from_buffers(tokens, facts.top_k, hidden, context.peer_inside)):
        facts.ffn, facts.source["ffn"] = ffn, "the routed-token buffers the call (or its peers) allocates"
    _weights(facts, found, stacks, context.kernels)
    return facts


def _weights(facts: MoeFacts, found: list[_Stack], stacks: Sequence[Tensor], kernels: Sequence[str]) -> None:
    fp4 = next((k for k in kernels if _FP4_KERNEL.search(k)), None)
    if fp4 is not None:
        facts.weight_itemsize, facts.weight_name = _WEIGHT_BYTES["mxfp4"], "mxfp4"
        facts.source["weights"] = f"the kernel {fp4[:60]} (MXFP4 weights)"
    elif any(s.packed for s in found):
        facts.weight_itemsize, facts.weight_name = 0.5, "4-bit (two a byte; block scales not recorded)"
        facts.source["weights"] = "the packed weight stacks"
    elif stacks:
        facts.weight_itemsize, facts.weight_name = stacks[0].itemsize, stacks[0].dtype
        facts.source["weights"] = "the weight arguments' dtype"


# --------------------------------------------------------------------------- --model-config


def _config_weights(model: ModelConfig) -> tuple[float, str] | None:
    if model.weight_dtype in _WEIGHT_BYTES:
        return _WEIGHT_BYTES[model.weight_dtype], model.weight_dtype
    try:
        dt = canonical_dtype(model.weight_dtype)
    except LedgerError:
        return None
    return DTYPE_BYTES[dt], dt


def with_model(op: str, facts: MoeFacts, model: ModelConfig | None, world_size: int,
               warnings: list[str]) -> MoeFacts:
    """The trace's facts with the --model-config's in their place where it has them (it overrides), each
    disagreement a warning naming both values."""
    if model is None:
        return facts
    tp = model.tensor_parallel or world_size
    config = {"experts": model.experts, "top_k": model.top_k,
              "ffn": -(-model.moe_intermediate // tp) if model.moe_intermediate and tp else None}
    if model.moe_intermediate and not tp and facts.ffn is None:
        raise Missing("the tensor-parallel size (the trace's distributedInfo, or \"tensor_parallel_size\" in "
                      "the model config)")
    for name, value in config.items():
        if value is None:
            continue
        traced = getattr(facts, name)
        if traced is not None and traced != value:
            per_rank = f" ({model.moe_intermediate} / tensor-parallel {tp})" if name == "ffn" else ""
            warnings.append(f"{op}: the trace gives {name.replace('_', '-')} {traced} "
                            f"({facts.source.get(name, 'the trace')}), the model config {model.path} "
                            f"{value}{per_rank}: the config's value is used")
        setattr(facts, name, value)
        facts.source[name] = f"--model-config {model.path}"
    if facts.weight_itemsize is None or model.weight_dtype in _WEIGHT_BYTES:
        weights = _config_weights(model)
        if weights is not None:
            facts.weight_itemsize, facts.weight_name = weights
            facts.source["weights"] = f"--model-config {model.path}"
    return facts


def _cost(op: str, x: Tensor, experts: int | None, context: OpContext, *, stacks: Sequence[Tensor] = (),
          routing: Tensor | None = None) -> list[Term]:
    facts = with_model(op, moe_facts(x, experts, context, stacks=stacks, routing=routing), context.model,
                       context.world_size, context.warnings)
    if facts.weight_itemsize is None and context.model is not None:  # the config names no dtype
        facts.weight_itemsize, facts.weight_name = x.itemsize, f"{x.dtype} (the activations' dtype)"
    e, k, ffn, itemsize = facts.need(op)
    context.label.update(experts=e, top_k=k, ffn=ffn, weights=facts.weight_name.split(" ")[0])
    terms = moe_terms(facts.tokens, facts.hidden, ffn, e, k, x.itemsize, itemsize, facts.weight_name)
    said = "; ".join(f"{name} from {where}" for name, where in facts.source.items())
    return [*terms[:-1], Term(terms[-1].name, flops=terms[-1].flops, note=f"{terms[-1].note} ({said})")]


@formula("vllm::moe_forward", source=SRC_MOE, roof="matmul", inside=True, _user=False)
def moe_forward(hidden_states: Tensor, router_logits: Tensor, *, context: OpContext) -> list[Term]:
    """moe_forward(hidden_states [T, H], router_logits [T, E], layer_name): top-k and the expert FFN width
    are no arguments, so they come from the calls and kernels recorded inside (or --model-config)."""
    return _cost("vllm::moe_forward", hidden_states, router_logits.shape[-1], context)


@formula("vllm::moe_forward_shared", source=SRC_MOE, roof="matmul", inside=True, _user=False)
def moe_forward_shared(hidden_states: Tensor, router_logits: Tensor, *, context: OpContext) -> list[Term]:
    """moe_forward_shared(hidden_states, router_logits, layer_name): the routed experts as moe_forward (the
    shared experts' GEMMs are ops of their own)."""
    return _cost("vllm::moe_forward_shared", hidden_states, router_logits.shape[-1], context)


def _fused(op: str) -> Any:
    def fused_experts(x: Tensor, w1: Tensor, w2: Tensor, topk_weights: Tensor, topk_ids: Tensor, *,
                      context: OpContext) -> list[Term]:
        return _cost(op, x, None, context, stacks=(w1, w2), routing=topk_ids)

    fused_experts.__doc__ = (f"{op}(hidden_states [T, H], w1 [E, 2F, H], w2 [E, H, F], topk_weights [T, k], "
                             "topk_ids [T, k], …)")
    return fused_experts


for _op in ("vllm::outplace_fused_experts", "vllm::inplace_fused_experts", "sglang::outplace_fused_experts",
            "sglang::inplace_fused_experts", "aiter::fused_moe_"):
    formula(_op, source=SRC_MOE, roof="matmul", inside=True, _user=False)(_fused(_op))

