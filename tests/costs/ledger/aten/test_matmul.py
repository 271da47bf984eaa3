"""The grouped, scaled (fp8) and fused-activation matmul readers, by hand and against torch's FlopCounterMode.
"""

from __future__ import annotations

import pytest

from nsroof.costs.ledger.aten import op_cost
from tests.costs.ledger.aten.flop_counts import flop_counter, flop_registry_count

torch = pytest.importorskip("torch")


def test_grouped_mm_by_hand() -> None:
    # A [128, 64] rows split over 4 groups of B [4, 64, 96]: 2·128·64·96 = 1,572,864 FLOP;
    # bytes: A 128·64·4 + B 4·64·96·4 + C 128·96·4 + offs 4·4 = 32,768 + 98,304 + 49,152 + 16
    cost = op_cost("aten::_grouped_mm", [[128, 64], [4, 64, 96], [4], [], []],
                   ["float", "float", "int", "", ""], [None] * 5)
    assert cost.flops == 2 * 128 * 64 * 96 and cost.bytes == 32_768 + 98_304 + 49_152 + 16


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
