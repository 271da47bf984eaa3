"""nsroof.costs.ledger.engine_moe: a fused-MoE call's experts, top-k, FFN width and weight format read from
the trace (its arguments, the calls and kernels under it), --model-config as an override and a cross-check."""

from __future__ import annotations

import pytest

from nsroof.costs.ledger.aten import op_cost
from nsroof.costs.ledger.custom import Call, OpContext, Tensor
from nsroof.costs.ledger.engine_context import model_config
from nsroof.costs.ledger.engine_moe import moe_facts

BF16 = "c10::BFloat16"
MXFP4 = 0.5 + 1 / 32  # 4-bit values + one 8-bit scale per 32


def gated_flops(tokens: int, top_k: int, hidden: int, ffn: int, experts: int) -> float:
    # gate + up 2·T·k·H·2F, activation 5·T·k·F, down 2·T·k·F·H, router 1·T·E, weighted sum 2·T·k·H
    rows = tokens * top_k
    return 4.0 * rows * hidden * ffn + 5.0 * rows * ffn + 2.0 * rows * ffn * hidden + tokens * experts \
        + 2.0 * rows * hidden


# what vLLM's gpt-oss path on triton_kernels records inside moe_forward (32 tokens, hidden 3072, 32 experts):
# the router's TopK(logits, k=4, …) allocating its [32, 4] values and int16 indices, a [1, 32] uint32
# bitmatrix sliced to [32, 1] (a view: no routing tensor), SortTokens over the [32, 4] pair, and views of the
# MXFP4 weight stacks [E, K/2, N]: gate/up [32, 1536, 5888] (K = 3072 packed two a byte, N = 2F) and down
# [32, 1472, 3072] (K = F = 2944 packed)
TRITON_INSIDE = (
    Call("TopK", [[32, 32], [], [], [], [], [], []], [BF16, "Scalar", "Scalar", "Scalar", "Scalar", "", ""],
         [None, 4, True, 1, True, None, None]),
    Call("aten::empty", [[], [], [], [], [], []], ["ScalarList", "Scalar", "", "", "Scalar", ""],
         [[32, 4], 15, None, None, False, None]),
    Call("aten::empty", [[], [], [], [], [], []], ["ScalarList", "Scalar", "", "", "Scalar", ""],
         [[32, 4], 2, None, None, False, None]),
    Call("aten::empty", [[], [], [], [], [], []], ["ScalarList", "Scalar", "", "", "Scalar", ""],
         [[1, 32], 28, None, None, False, None]),
    Call("aten::slice", [[32, 1], [], [], [], []], ["unsigned int", "Scalar", "Scalar", "Scalar", "Scalar"],
         [None, 0, 0, 32, 1]),
    Call("SortTokens", [[32, 4], [32, 4], []], [BF16, "short int", "Scalar"], [None, None, 32]),
    Call("aten::view", [[32, 1536, 5888], []], ["unsigned char", "ScalarList"], [None, [32, 1536, 5888]]),
    Call("aten::view", [[32, 1472, 3072], []], ["unsigned char", "ScalarList"], [None, [32, 1472, 3072]]),
)
TRITON_KERNELS = ("_matmul_ogs_NNT_bf16xbf16xmxfp4_16x128x256x1_swiglu", "_finalize_matmul_scatter_bf16")

# flashinfer's trtllm-gen MoE under vLLM's moe_forward on a B200 (888 tokens, hidden 3072, 128 experts): the
# [888, 4] int32 expert ids, the routed rows' fp8 activation [5472, 512] (5472 ≥ 888·4 = 3552 padded rows,
# F = 512 per rank) and the down projection's [5472, 3072] output; the GEMM kernels name E2M1 weights
TRTLLM_INSIDE = (
    Call("aten::empty", [[]] * 6, ["ScalarList"], [[888, 3072], 24, None, None, False, None]),
    Call("aten::empty", [[]] * 6, ["ScalarList"], [[888, 4], 3, None, None, False, None]),
    Call("aten::empty", [[]] * 6, ["ScalarList"], [[888, 4], 15, None, None, False, None]),
    Call("aten::empty", [[]] * 6, ["ScalarList"], [[3552], 3, None, None, None, None]),
    Call("aten::empty", [[]] * 6, ["ScalarList"], [[5472, 512], 0, None, None, None, None]),
    Call("aten::empty", [[]] * 6, ["ScalarList"], [[5472, 3072], 15, None, None, None, None]),
)
TRTLLM_KERNELS = ("bmm_MxE4m3_MxE2m1MxE4m3_Fp32_t128x16x256u2_s3", "routingIndicesHistogramKernel")


def test_moe_facts_from_the_triton_kernels_weight_stacks() -> None:
    ctx = OpContext(inside=TRITON_INSIDE, kernels=TRITON_KERNELS)
    facts = moe_facts(Tensor((32, 3072), "bf16"), 32, ctx)
    # experts from the router logits; k = 4 from the [32, 4] routing tensors (the [32, 1] slice is a view);
    # gate/up other dim 5888 = 2F, down's 1472 = F/2 packed: 5888 = 4·1472, so F = 5888 / 2 = 2944
    assert (facts.experts, facts.top_k, facts.ffn) == (32, 4, 2944)
    assert facts.weight_itemsize == MXFP4 and "mxfp4" in facts.source["weights"].lower()
    cost = op_cost("vllm::moe_forward", [[32, 3072], [32, 32], [], []], [BF16, BF16, "", ""], context=ctx)
    assert cost.known and cost.flops == gated_flops(32, 4, 3072, 2944, 32)


def test_moe_facts_from_the_routed_buffers_of_trtllm_gen() -> None:
    ctx = OpContext(inside=TRTLLM_INSIDE, kernels=TRTLLM_KERNELS)
    facts = moe_facts(Tensor((888, 3072), "bf16"), 128, ctx)
    # k = 4 from the int32 [888, 4] ids (the bf16 [888, 4] weights are no integer tensor); F = 512 from the
    # one non-hidden width of the [R ≥ 3552, c] buffers ([5472, 3072] is the hidden size)
    assert (facts.experts, facts.top_k, facts.ffn) == (128, 4, 512)
    cost = op_cost("vllm::moe_forward", [[888, 3072], [888, 128], []], [BF16, BF16, ""], context=ctx)
    # the weights: 128·(1 − (1 − 4/128)^888) ≈ 128.0 experts touched · 3·3072·512 at 0.5 + 1/32 B
    touched = 128 * (1 - (1 - 4 / 128) ** 888)
    assert cost.flops == gated_flops(888, 4, 3072, 512, 128)
    # the label (the report's flops_source) says what the number was computed from
    assert "experts=128, top_k=4, ffn=512, weights=mxfp4" in cost.label
    assert cost.bytes == pytest.approx(2 * 888 * 3072 * 2 + touched * 3 * 3072 * 512 * MXFP4)


def test_fused_experts_read_their_weight_arguments() -> None:
    # outplace_fused_experts(x [16, 512], w1 [8, 2·1024, 512], w2 [8, 512, 1024], topk_weights [16, 2],
    # topk_ids [16, 2]): gated, F = 2048 / 2 = 1024, k = 2, E = 8, bf16 weights
    shapes = [[16, 512], [8, 2048, 512], [8, 512, 1024], [16, 2], [16, 2]]
    types = [BF16, BF16, BF16, "float", "int"]
    for op in ("vllm::outplace_fused_experts", "sglang::inplace_fused_experts", "aiter::fused_moe_"):
        cost = op_cost(op, shapes, types, context=OpContext())
        touched = 8 * (1 - (1 - 2 / 8) ** 16)
        assert cost.flops == gated_flops(16, 2, 512, 1024, 8), op
        assert cost.bytes == pytest.approx(2 * 16 * 512 * 2 + touched * 3 * 512 * 1024 * 2), op


def test_moe_missing_facts_are_named() -> None:
    # nothing under the call: top-k and the FFN width are nowhere in the trace
    cost = op_cost("vllm::moe_forward", [[32, 3072], [32, 32], []], [BF16, BF16, ""], context=OpContext())
    assert "top-k, expert FFN width, expert weight dtype" in cost.missing and "--model-config" in cost.missing
    # two candidate widths that are no (F, 2F) pair: no guess
    odd = (*TRTLLM_INSIDE, Call("aten::empty", [[]] * 6, ["ScalarList"], [[5472, 700], 0, None, None, None,
                                                                          None]))
    facts = moe_facts(Tensor((888, 3072), "bf16"), 128, OpContext(inside=odd))
    assert facts.ffn is None


def test_the_model_config_overrides_and_a_disagreement_is_a_warning() -> None:
    # gpt-oss-120b: 128 experts, top-4, intermediate 2880 over tensor-parallel 8 = 360 per rank; the trace's
    # buffers say 512 (360 padded): the config wins, the warning names both values
    config = model_config({"num_local_experts": 128, "num_experts_per_tok": 4, "intermediate_size": 2880,
                           "hidden_size": 2880, "quantization_config": {"quant_method": "mxfp4"}}, "cfg.json")
    ctx = OpContext(inside=TRTLLM_INSIDE, kernels=TRTLLM_KERNELS, model=config, world_size=8)
    cost = op_cost("vllm::moe_forward", [[888, 3072], [888, 128], []], [BF16, BF16, ""], context=ctx)
    assert cost.flops == gated_flops(888, 4, 3072, 360, 128)
    assert ctx.warnings == ["vllm::moe_forward: the trace gives ffn 512 (the routed-token buffers the call "
                            "(or its peers) allocates), the model config cfg.json 360 (2880 / "
                            "tensor-parallel 8): the config's value is used"]
    # agreeing facts: no warning
    same = model_config({"num_local_experts": 128, "num_experts_per_tok": 4, "intermediate_size": 4096},
                        "same.json")
    quiet = OpContext(inside=TRTLLM_INSIDE, kernels=TRTLLM_KERNELS, model=same, world_size=8)
    op_cost("vllm::moe_forward", [[888, 3072], [888, 128], []], [BF16, BF16, ""], context=quiet)
    assert quiet.warnings == []
