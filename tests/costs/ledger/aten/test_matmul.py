"""The grouped, scaled (fp8) and fused-activation matmul readers, by hand and against torch's FlopCounterMode.
"""

from __future__ import annotations

import pytest

from nsroof.costs.ledger.aten import OpCost, op_cost
from nsroof.costs.ledger.matmul import grouped_gemm
from tests.costs.ledger.aten.flop_counts import flop_counter, flop_registry_count

torch = pytest.importorskip("torch")


def test_grouped_mm_by_hand() -> None:
    # A [128, 64] rows split over 4 groups of B [4, 64, 96]: 2·128·64·96 = 1,572,864 FLOP;
    # bytes: A 128·64·4 + B 4·64·96·4 + C 128·96·4 + offs 4·4 = 32,768 + 98,304 + 49,152 + 16
    cost = op_cost("aten::_grouped_mm", [[128, 64], [4, 64, 96], [4], [], []],
                   ["float", "float", "int", "", ""], [None] * 5)
    assert cost.flops == 2 * 128 * 64 * 96 and cost.bytes == 32_768 + 98_304 + 49_152 + 16


# MoE: T routed rows (token·top-k assignments) of A [T, 64] over E = 8 experts' B [8, 64, 96] in bf16.
# FLOP 2·T·64·96 whatever the routing; bytes A T·64·2 + C T·96·2 + offs 8·4 + the B of the experts that
# receive rows, 64·96·2 = 12,288 each (all 8 = 98,304 was the count before, whatever T).
_EXPERT = 64 * 96 * 2


def _moe(rows: int, offs: object = "") -> OpCost:
    return op_cost("aten::_grouped_mm", [[rows, 64], [8, 64, 96], [8], [], []],
                   ["c10::BFloat16", "c10::BFloat16", "int", "", ""], ["", "", offs, "", ""])


def test_grouped_mm_decode_reads_at_most_min_experts_rows_weights() -> None:
    # decode, 4 rows / 8 experts, routing not recorded: at most min(8, 4) = 4 experts' weights;
    # 4·64·2 + 4·96·2 + 32 + 4·12,288 = 512 + 768 + 32 + 49,152 = 50,464 (98,304 + 1,312 = 99,616 before)
    cost = _moe(4)
    assert cost.flops == 2 * 4 * 64 * 96
    assert cost.bytes == 512 + 768 + 32 + 4 * _EXPERT == 50_464
    assert "groups_read=at most 4 (routing not recorded)" in cost.label
    op = grouped_gemm(rows=4, k=64, n=96, groups=8)
    assert op.bytes == cost.bytes - 32
    assert any("at most min(E, T) = 4 of 8 experts" in n and "not recorded" in n for n in op.cost.notes)


def test_grouped_mm_reads_the_weights_of_the_experts_the_recorded_offsets_route_to() -> None:
    # offsets recorded [1, 1, 3, 3, 3, 4, 4, 4]: experts 0, 2, 5 get 1, 2, 1 rows -> 3 experts' weights;
    # 512 + 768 + 32 + 3·12,288 = 38,176, exact: no bound note
    cost = _moe(4, [1, 1, 3, 3, 3, 4, 4, 4])
    assert cost.flops == 2 * 4 * 64 * 96
    assert cost.bytes == 512 + 768 + 32 + 3 * _EXPERT == 38_176
    assert "groups_read=3," in cost.label
    assert not grouped_gemm(rows=4, k=64, n=96, groups=8, active_groups=3).cost.notes
    # one row per expert for the first four: 4 experts, the bound's count, now exact
    assert _moe(4, [1, 2, 3, 4, 4, 4, 4, 4]).bytes == 50_464


def test_grouped_mm_prefill_reads_every_experts_weights() -> None:
    # 64 rows / 8 experts: min(8, 64) = 8, all weights (unchanged):
    # 64·64·2 + 64·96·2 + 32 + 8·12,288 = 8,192 + 12,288 + 32 + 98,304 = 118,816
    assert _moe(64).bytes == 8_192 + 12_288 + 32 + 8 * _EXPERT == 118_816
    # recorded offsets, 8 rows each: 8 experts, exact
    even = _moe(64, [8, 16, 24, 32, 40, 48, 56, 64])
    assert even.bytes == 118_816 and "groups_read" not in even.label
    assert not grouped_gemm(rows=64, k=64, n=96, groups=8, active_groups=8).cost.notes
    # recorded offsets, every row on expert 3: 1 expert's weights, 118,816 − 7·12,288 = 32,800
    assert _moe(64, [0, 0, 0, 64, 64, 64, 64, 64]).bytes == 118_816 - 7 * _EXPERT == 32_800


def test_grouped_mm_ignores_offsets_that_do_not_fit() -> None:
    # too few values, or descending: not a routing, so the bound stands (4 rows: 50,464)
    assert _moe(4, [1, 2, 3]).bytes == _moe(4, [4, 3, 2, 1, 0, 0, 0, 0]).bytes == 50_464


def test_grouped_mm_offsets_agree_with_torch() -> None:
    # the routing torch._grouped_mm computes: rows outside an expert's range meet no weight, so an expert
    # with an empty range is never read (its weights may be NaN without touching the output)
    a = torch.randn(4, 64, dtype=torch.bfloat16)
    b = torch.randn(8, 64, 96, dtype=torch.bfloat16)
    offs = [1, 1, 3, 3, 3, 4, 4, 4]
    b[[1, 3, 4, 6, 7]] = float("nan")
    out = torch._grouped_mm(a, b, torch.tensor(offs, dtype=torch.int32))
    assert not out.isnan().any()
    assert _moe(4, offs).bytes == 512 + 768 + 32 + 3 * _EXPERT


def test_addmm_activation_matmul_agrees_with_flop_counter() -> None:
    # FlopCounterMode counts addmm's 2·m·n·k = 2·32·128·64 = 524,288; _addmm_activation adds the bias add (1)
    # and relu (1) per output: + 2·32·128 = 8,192
    bias, a, b = torch.randn(128), torch.randn(32, 64), torch.randn(64, 128)
    assert flop_counter(torch.addmm, bias, a, b) == 2 * 32 * 128 * 64
    cost = op_cost("aten::_addmm_activation", [[128], [32, 64], [64, 128], [], [], []], ["float"] * 3,
                   [None, None, None, 1, 1, False])
    assert cost.flops == 2 * 32 * 128 * 64 + 2 * 32 * 128


def test_scaled_mm_agrees_with_flop_counter_and_counts_the_scales() -> None:
    # fp8 [64, 128] @ [128, 32] -> bf16 (out_dtype 15): 2·64·32·128 = 524,288 FLOP, as FlopCounterMode;
    # bytes: A 64·128·1 + B 128·32·1 + C 64·32·2 + two fp32 scalar scales 2·4 = 8,192 + 4,096 + 4,096 + 8
    flops = flop_registry_count(torch.ops.aten._scaled_mm, (64, 128), (128, 32), (), ())
    cost = op_cost("aten::_scaled_mm", [[64, 128], [128, 32], [], [], [], [], [], []],
                   ["c10::Float8_e4m3fn", "c10::Float8_e4m3fn", "float", "float", "", "", "Scalar", "Scalar"],
                   [None, None, None, None, None, None, 15, False])
    assert cost.flops == flops == 2 * 64 * 32 * 128
    assert cost.bytes == 8_192 + 4_096 + 4_096 + 8
