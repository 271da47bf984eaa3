"""The attention readers: the flash and efficient kernels in their layout against torch's FlopCounterMode, and
each kernel's causal mask counted as that kernel aligns it."""

from __future__ import annotations

import pytest

from nsroof.costs.ledger.aten import op_cost
from tests.costs.ledger.aten.flop_counts import flop_registry_count

torch = pytest.importorskip("torch")


@pytest.mark.parametrize("op, q_at, concrete", [
    ("_flash_attention_forward", 0, [None] * 7 + [0.0, False, False]),
    ("_efficient_attention_forward", 0, [None] * 8 + [0.0, 0]),
])
def test_flash_and_efficient_kernels_agree_with_flop_counter_in_their_layout(op: str, q_at: int,
                                                                             concrete: list) -> None:
    # these kernels take (batch, seq, heads, dim); FlopCounterMode's formula reads (batch, heads, seq, dim),
    # so it is given the transposed shapes: 4·b·h·sq·skv·d = 4·2·4·64·48·32 = 3,145,728 for the two matmuls
    # (our softmax terms come on top: 5·b·h·sq·skv + b·h·sq·d)
    meta = dict(device="meta", dtype=torch.bfloat16)
    q, k = torch.empty(2, 4, 64, 32, **meta), torch.empty(2, 4, 48, 32, **meta)
    if op == "_flash_attention_forward":
        counted = flop_registry_count(torch.ops.aten._flash_attention_forward, q, k, k, None, None, 64, 48,
                                      0.0, False, False)
    else:
        counted = flop_registry_count(torch.ops.aten._efficient_attention_forward, q, k, k, None, None, None,
                                      64, 48)
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
# lower-right (FlashAttention 2's kernels; custom_mask_type 2): 2 + 3 + 4 = 9. FlopCounterMode ignores the
# mask altogether (it counts all 3·4 = 12 pairs), so these counts are checked against the masks, not
# against it.
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
    # 4·bh·pairs·d (QK^T, PV) + 5·bh·pairs (softmax) + bh·sq·d (divide): 4·2·6·16 + 5·2·6 + 2·3·16 = 924
    # upper-left, 4·2·9·16 + 5·2·9 + 2·3·16 = 1,338 lower-right
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
    for kernel in (lambda: torch.ops.aten._scaled_dot_product_flash_attention_for_cpu(q, k, v,
                                                                                      is_causal=True)[0],
                   lambda: torch.ops.aten._scaled_dot_product_attention_math(q, k, v, is_causal=True)[0]):
        got = run(kernel)
        assert all(torch.allclose(a, b, atol=1e-5) for a, b in zip(got, run(masked(upper)), strict=True))
        assert not all(torch.allclose(a, b, atol=1e-5) for a, b in zip(got, run(masked(lower)), strict=True))
    assert causal_pairs(3, 4, UPPER_LEFT) == int(upper.sum()) == 6
