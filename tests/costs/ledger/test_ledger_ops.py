"""The aten formulas added for 2026 models (RNNs, the transformer fast path, grouped and fp8 matmuls, resampling,
data movement) and the byte fixes (output dtype after promotion; out= written, not read), by hand and against
torch's FlopCounterMode where it counts the op."""

from __future__ import annotations

import pytest

from nsroof.costs.ledger.aten import op_cost

torch = pytest.importorskip("torch")


def test_promotion_sizes_the_output_at_the_promoted_dtype() -> None:
    # fp16 [1024] + fp32 [1024] -> fp32 output: read 1024·2 + 1024·4, write 1024·4 = 10,240 B
    cost = op_cost("aten::add", [[1024], [1024], []], ["c10::Half", "float", "Scalar"], [None, None, 1])
    assert cost.bytes == 1024 * 2 + 1024 * 4 + 1024 * 4 == 10_240
    # in place, the output keeps self's dtype: fp16 self += fp32 other: read 2048 + 4096, write 2048
    inplace = op_cost("aten::add_", [[1024], [1024], []], ["c10::Half", "float", "Scalar"], [None, None, 1])
    assert inplace.bytes == 1024 * 2 + 1024 * 4 + 1024 * 2


def test_out_argument_is_written_not_read() -> None:
    # torch.mul(a, b, out=o), 4096 fp32 each: read a, b (2·16,384 B), write o (16,384 B) = 49,152 B
    cost = op_cost("aten::mul", [[4096], [4096], [4096]], ["float"] * 3, [None, None, None])
    assert cost.bytes == 3 * 4096 * 4 == 49_152 and cost.flops == 4096


def test_grouped_mm_by_hand() -> None:
    # A [128, 64] rows split over 4 groups of B [4, 64, 96]: 2·128·64·96 = 1,572,864 FLOP;
    # bytes: A 128·64·4 + B 4·64·96·4 + C 128·96·4 + offs 4·4 = 32,768 + 98,304 + 49,152 + 16
    cost = op_cost("aten::_grouped_mm", [[128, 64], [4, 64, 96], [4], [], []], ["float", "float", "int", "", ""],
                   [None] * 5)
    assert cost.flops == 2 * 128 * 64 * 96 and cost.bytes == 32_768 + 98_304 + 49_152 + 16


def _flop_counter(fn, *args) -> int:  # type: ignore[no-untyped-def]
    from torch.utils.flop_counter import FlopCounterMode

    with FlopCounterMode(display=False) as counter:
        fn(*args)
    return int(counter.get_total_flops())


def test_addmm_activation_matmul_agrees_with_flop_counter() -> None:
    # FlopCounterMode counts addmm's 2·m·n·k = 2·32·128·64 = 524,288; _addmm_activation adds the bias add (1)
    # and relu (1) per output: + 2·32·128 = 8,192
    bias, a, b = torch.randn(128), torch.randn(32, 64), torch.randn(64, 128)
    assert _flop_counter(torch.addmm, bias, a, b) == 2 * 32 * 128 * 64
    cost = op_cost("aten::_addmm_activation", [[128], [32, 64], [64, 128], [], [], []], ["float"] * 3,
                   [None, None, None, 1, 1, False])
    assert cost.flops == 2 * 32 * 128 * 64 + 2 * 32 * 128


def test_lstm_layer_by_hand() -> None:
    # mkldnn_rnn_layer, LSTM (mode 2), seq 16, batch 4, input 32, hidden 64: gate matmuls
    # 2·16·4·4·64·(32 + 64) = 3,145,728; bias adds 2·16·4·256 = 32,768; cell 15·16·4·64 = 61,440
    shapes = [[16, 4, 32], [256, 32], [256, 64], [256], [256], [4, 64], [4, 64]] + [[]] * 9
    concrete = [None] * 7 + [False, [], 2, 64, 1, True, False, False, True]
    cost = op_cost("aten::mkldnn_rnn_layer", shapes, ["float"] * 7 + ["Scalar"] * 9, concrete)
    assert cost.flops == 3_145_728 + 32_768 + 61_440


def test_upsample_bilinear_by_hand() -> None:
    # 2·3 planes of 8×8 -> 16×16: 7 FLOP per output (4 multiplies + 3 adds): 6·256·7 = 10,752;
    # bytes: read 6·64·4 + write 6·256·4 = 1,536 + 6,144
    cost = op_cost("aten::upsample_bilinear2d", [[2, 3, 8, 8], [], [], []], ["float", "", "", ""],
                   [None, None, False, [2.0, 2.0]])
    assert cost.flops == 6 * 256 * 7 and cost.bytes == 1_536 + 6_144


def test_cat_reads_the_tensor_list() -> None:
    # cat of [4, 4] and [4, 4] fp32: read 32·4, write 32·4 bytes, no arithmetic
    cost = op_cost("aten::cat", [[[4, 4], [4, 4]], []], ["TensorList", "Scalar"], [None, 0])
    assert (cost.flops, cost.bytes) == (0, 2 * 32 * 4)


def test_index_names_what_torch_does_not_record() -> None:
    assert "not recorded" in op_cost("aten::index", [[64, 64], []], ["float", ""]).missing
    assert "not recorded" in op_cost("aten::index_put_", [[64, 64], [], [3, 64], []], ["float", "", "float", ""],
                                     [None, None, None, False]).missing


def test_index_and_index_put_count_the_gathered_elements_and_the_index_tensors(tmp_path) -> None:  # type: ignore[no-untyped-def]
    from torch.profiler import ProfilerActivity, profile
    from torch.utils.flop_counter import FlopCounterMode

    from nsroof.pipeline import analyze

    x, rows, cols, values = torch.randn(64, 32), torch.tensor([1, 5, 7]), torch.tensor([0, 2, 3]), torch.randn(3, 32)
    mask = torch.zeros(64, 32, dtype=torch.bool)
    mask[:10, :10] = True  # 100 elements

    def work() -> None:
        x[rows]
        x[rows, cols]
        x[mask]
        x[:, rows]
        x.index_put_((rows,), values, accumulate=True)
        x[rows] = values

    with FlopCounterMode(display=False) as counter:
        work()
    assert counter.get_total_flops() == 0  # FlopCounterMode counts no arithmetic in indexing, nor do we below
    with profile(activities=[ProfilerActivity.CPU], record_shapes=True) as prof:
        work()
    prof.export_chrome_trace(str(tmp_path / "index.json"))
    ops = analyze([tmp_path / "index.json"]).ops
    got = [(str(r.op), r.flops, r.bytes) for r in ops.itertuples() if "index" in str(r.op)]
    assert got == [
        # x[rows]: 3 rows × 32 = 96 fp32 read and written (768 B) + 3 int64 indices (24 B)
        ("aten::index", 0, 96 * 4 * 2 + 3 * 8),
        # x[rows, cols]: 3 elements (24 B) + two index tensors of 3 int64 (48 B)
        ("aten::index", 0, 3 * 4 * 2 + 2 * 3 * 8),
        # x[mask]: nonzero gives two int64 index tensors of the 100 set elements: 800 B + 1,600 B
        ("aten::index", 0, 100 * 4 * 2 + 2 * 100 * 8),
        # x[:, rows]: 64 × 3 = 192 elements (1,536 B) + 24 B of indices
        ("aten::index", 0, 192 * 4 * 2 + 3 * 8),
        # index_put_(accumulate=True): values read (384 B), 96 elements of x read and written (768 B), indices
        # (24 B); one add per element: 96 FLOP
        ("aten::_index_put_impl_", 96, 96 * 4 + 96 * 4 * 2 + 3 * 8),
        # x[rows] = values: values read, 96 elements written, indices: 384 + 384 + 24 = 792 B
        ("aten::_index_put_impl_", 0, 96 * 4 * 2 + 3 * 8),
    ]


def _registry(op, *args, **kwargs) -> int:  # type: ignore[no-untyped-def]
    from torch.utils.flop_counter import flop_registry

    return int(flop_registry[op](*args, **kwargs))


def test_scaled_mm_agrees_with_flop_counter_and_counts_the_scales() -> None:
    # fp8 [64, 128] @ [128, 32] -> bf16 (out_dtype 15): 2·64·32·128 = 524,288 FLOP, as FlopCounterMode;
    # bytes: A 64·128·1 + B 128·32·1 + C 64·32·2 + two fp32 scalar scales 2·4 = 8,192 + 4,096 + 4,096 + 8
    flops = _registry(torch.ops.aten._scaled_mm, (64, 128), (128, 32), (), ())
    cost = op_cost("aten::_scaled_mm", [[64, 128], [128, 32], [], [], [], [], [], []],
                   ["c10::Float8_e4m3fn", "c10::Float8_e4m3fn", "float", "float", "", "", "Scalar", "Scalar"],
                   [None, None, None, None, None, None, 15, False])
    assert cost.flops == flops == 2 * 64 * 32 * 128
    assert cost.bytes == 8_192 + 4_096 + 4_096 + 8


@pytest.mark.parametrize("op, q_at, concrete", [
    ("_flash_attention_forward", 0, [None] * 7 + [0.0, False, False]),
    ("_efficient_attention_forward", 0, [None] * 8 + [0.0, 0]),
])
def test_flash_and_efficient_kernels_agree_with_flop_counter_in_their_layout(op: str, q_at: int,
                                                                             concrete: list) -> None:
    # these kernels take (batch, seq, heads, dim); FlopCounterMode's formula reads (batch, heads, seq, dim), so
    # it is given the transposed shapes: 4·b·h·sq·skv·d = 4·2·4·64·48·32 = 3,145,728 for the two matmuls
    # (our softmax terms come on top: 5·b·h·sq·skv + b·h·sq·d)
    meta = dict(device="meta", dtype=torch.bfloat16)
    q, k = torch.empty(2, 4, 64, 32, **meta), torch.empty(2, 4, 48, 32, **meta)
    if op == "_flash_attention_forward":
        counted = _registry(torch.ops.aten._flash_attention_forward, q, k, k, None, None, 64, 48, 0.0, False, False)
    else:
        counted = _registry(torch.ops.aten._efficient_attention_forward, q, k, k, None, None, None, 64, 48)
    assert counted == 4 * 2 * 4 * 64 * 48 * 32
    shapes = [[2, 64, 4, 32], [2, 48, 4, 32], [2, 48, 4, 32]] + [[]] * (len(concrete) - 3)
    cost = op_cost(f"aten::{op}", shapes, ["c10::BFloat16"] * 3 + [""] * (len(concrete) - 3), concrete)
    assert cost.flops == counted + 5 * 2 * 4 * 64 * 48 + 2 * 4 * 64 * 32


def test_causal_counts_the_same_pairs_on_every_attention_kernel() -> None:
    # sq = skv = 64 causal: 64·65/2 = 2,080 visible pairs per head on SDPA, flash and efficient kernels alike
    bhsd = [[1, 2, 64, 16], [1, 2, 64, 16], [1, 2, 64, 16]]
    bshd = [[1, 64, 2, 16], [1, 64, 2, 16], [1, 64, 2, 16]]
    sdpa = op_cost("aten::_scaled_dot_product_flash_attention", bhsd + [[]] * 3, ["float"] * 3 + [""] * 3,
                   [None] * 3 + [0.0, True, False])
    flash = op_cost("aten::_flash_attention_forward", bshd + [[]] * 7, ["float"] * 3 + [""] * 7,
                    [None] * 7 + [0.0, True, False])
    eff = op_cost("aten::_efficient_attention_forward", bshd + [[]] * 7, ["float"] * 3 + [""] * 7,
                  [None] * 8 + [0.0, 2])
    expect = 4 * 2 * 2_080 * 16 + 5 * 2 * 2_080 + 2 * 64 * 16
    assert sdpa.flops == flash.flops == eff.flops == expect


# sq = 3 queries, skv = 4 keys, bh = 1·2, d = 16: each op family counts the mask its kernel applies.
# Upper-left (torch's is_causal; memory-efficient custom_mask_type 1): 1 + 2 + 3 = 6 visible pairs per head;
# lower-right (FlashAttention 2's kernels; custom_mask_type 2): 2 + 3 + 4 = 9. FlopCounterMode ignores the mask
# altogether (it counts all 3·4 = 12 pairs), so these counts are checked against the masks, not against it.
_BHSD = [[1, 2, 3, 16], [1, 2, 4, 16], [1, 2, 4, 16]]
_BSHD = [[1, 3, 2, 16], [1, 4, 2, 16], [1, 4, 2, 16]]


@pytest.mark.parametrize("op, shapes, concrete, pairs", [
    ("aten::scaled_dot_product_attention", _BHSD, [None] * 3 + [None, 0.0, True], 6),
    ("aten::_scaled_dot_product_flash_attention_for_cpu", _BHSD, [None] * 3 + [0.0, True], 6),
    ("aten::_scaled_dot_product_efficient_attention", _BHSD, [None] * 3 + [None, False, 0.0, True], 6),
    ("aten::_scaled_dot_product_cudnn_attention", _BHSD, [None] * 3 + [None, False, 0.0, True], 6),
    ("aten::_scaled_dot_product_flash_attention", _BHSD, [None] * 3 + [0.0, True], 9),
    ("aten::_flash_attention_forward", _BSHD, [None] * 7 + [0.0, True], 9),
    ("flash_attn::_flash_attn_forward", _BSHD, [None] * 3 + [0.0, 0.25, True], 9),
    ("aten::_efficient_attention_forward", _BSHD, [None] * 8 + [0.0, 1], 6),
    ("aten::_efficient_attention_forward", _BSHD, [None] * 8 + [0.0, 2], 9),
])
def test_a_non_square_causal_mask_counts_as_its_kernel_aligns_it(op: str, shapes: list, concrete: list,
                                                                 pairs: int) -> None:
    n = len(concrete)
    cost = op_cost(op, shapes + [[]] * (n - 3), ["float"] * 3 + [""] * (n - 3), concrete)
    # 4·bh·pairs·d (QK^T, PV) + 5·bh·pairs (softmax) + bh·sq·d (divide): 4·2·6·16 + 5·2·6 + 2·3·16 = 924 upper-left,
    # 4·2·9·16 + 5·2·9 + 2·3·16 = 1,338 lower-right
    assert cost.flops == 4 * 2 * pairs * 16 + 5 * 2 * pairs + 2 * 3 * 16 == {6: 924, 9: 1_338}[pairs]


@pytest.mark.parametrize("op, pairs", [
    ("aten::_scaled_dot_product_efficient_attention_backward", 6),
    ("aten::_scaled_dot_product_flash_attention_for_cpu_backward", 6),
    ("aten::_scaled_dot_product_flash_attention_backward", 9),
])
def test_a_non_square_causal_backward_counts_as_its_forward(op: str, pairs: int) -> None:
    # (grad_out, query, key, …, is_causal): 10·bh·pairs·d (5 matmuls) + 4·bh·pairs + 2·bh·sq·d:
    # 10·2·6·16 + 4·2·6 + 2·2·3·16 = 2,160 upper-left; 10·2·9·16 + 4·2·9 + 2·2·3·16 = 3,144 lower-right
    causal_at = 7 if op.endswith("for_cpu_backward") else 11
    concrete = [None] * causal_at + [True]
    shapes = [_BHSD[0]] + _BHSD + [[]] * (causal_at - 3)
    cost = op_cost(op, shapes, ["float"] * 4 + [""] * (causal_at - 3), concrete)
    assert cost.flops == 10 * 2 * pairs * 16 + 4 * 2 * pairs + 2 * 2 * 3 * 16 == {6: 2_160, 9: 3_144}[pairs]


@pytest.mark.parametrize("backward", [False, True])
def test_the_cpu_kernels_apply_the_upper_left_mask_they_are_counted_with(backward: bool) -> None:
    # run torch's CPU flash kernel (what F.scaled_dot_product_attention picks on CPU) and its math path on
    # sq = 3, skv = 4 causal and compare with attention under each of torch's own masks: both are upper-left
    from torch.nn.attention.bias import causal_lower_right, causal_upper_left

    from nsroof.costs.ledger.attention import UPPER_LEFT, causal_pairs

    gen = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(1, 2, n, 16, generator=gen, requires_grad=True) for n in (3, 4, 4))

    def run(fn):  # type: ignore[no-untyped-def]
        out = fn()
        if not backward:
            return [out.detach()]
        grads = torch.autograd.grad(out.square().sum(), (q, k, v))
        return [g.detach() for g in grads]

    def masked(mask: torch.Tensor):  # type: ignore[no-untyped-def]
        return lambda: torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=mask)

    upper, lower = causal_upper_left(3, 4)._materialize(), causal_lower_right(3, 4)._materialize()
    for kernel in (lambda: torch.ops.aten._scaled_dot_product_flash_attention_for_cpu(q, k, v, is_causal=True)[0],
                   lambda: torch.ops.aten._scaled_dot_product_attention_math(q, k, v, is_causal=True)[0]):
        got = run(kernel)
        assert all(torch.allclose(a, b, atol=1e-5) for a, b in zip(got, run(masked(upper)), strict=True))
        assert not all(torch.allclose(a, b, atol=1e-5) for a, b in zip(got, run(masked(lower)), strict=True))
    assert causal_pairs(3, 4, UPPER_LEFT) == int(upper.sum()) == 6


def test_uncosted_rows_name_their_real_cause() -> None:
    from nsroof.costs.ledger.aten import BOOKKEEPING_REASON, VIEW_REASON

    assert op_cost("aten::transpose", [[4, 4], [], []], ["float", "Scalar", "Scalar"], [None, 0, 1]).missing == VIEW_REASON
    assert op_cost("detach", [[4]], ["float"]).missing == VIEW_REASON
    wrapper = "autograd::engine::evaluate_function: AddmmBackward0"
    assert op_cost(wrapper, [], []).missing == op_cost("MmBackward0", [], []).missing == BOOKKEEPING_REASON
    assert "@nsroof.formula(\"mylib::op\")" in op_cost("mylib::op.default", [[4]], ["float"]).missing
    from nsroof.costs.ledger.aten import INDUCTOR_CPU_REASON

    # the names torch 2.13's Inductor gives its C++ kernels under cpp.enable_kernel_profile
    for name in ("graph_0_cpp_fused_gelu_0", "graph_3_cpp_fused_native_layer_norm_native_layer_norm_backward_0",
                 "cpp_fused_relu_1"):
        assert op_cost(name, [], []).missing == INDUCTOR_CPU_REASON, name
    assert op_cost("graph_0_cpp_fused", [], []).missing != INDUCTOR_CPU_REASON  # no kernel name after the prefix


def test_the_b200_index_is_costed_from_its_child_ops() -> None:
    from nsroof.pipeline import analyze
    from tests._paths import SHARED_FIXTURES

    trace = SHARED_FIXTURES / "traces" / "tracelens__b200__eager_trace.json.gz"
    if not trace.exists():
        pytest.skip("shared B200 trace absent")
    frame = analyze(trace).frame
    row = frame[frame["op"].astype(str) == "aten::index"].iloc[0]
    # one row of a bf16 [888, 2880] picked by one int64 index (as_strided to [1, 2880]): 2880·2 read + 2880·2
    # written + 8 = 11,528 B, no arithmetic
    assert (row["flops"], row["bytes"], row["missing"]) == (0, 11_528, "")
