"""The convolution readers: costs only where the stride and padding were recorded; forward and backward
against torch's own FLOP counter."""

from __future__ import annotations

import math

import pytest

from nsroof.costs.ledger.aten import CONV_ARGS_UNRECORDED, concrete_values, op_cost

CONV_7x7 = ([[8, 3, 224, 224], [64, 3, 7, 7], [], [], [], [], []],
            ["float", "float", "", "ScalarList", "ScalarList", "ScalarList", "Scalar"])


def test_conv_uses_the_recorded_stride_and_padding() -> None:
    # 7×7 stride 2 padding 3 on 224×224: P = Q = (224 + 6 − 7)//2 + 1 = 112;
    # 2·N·K·P·Q·C·R·S = 2·8·64·112·112·3·49 = 1,888,223,232 FLOP (stride 1 padding 0 would say 218×218: 3.8×)
    shapes, types = CONV_7x7
    cost = op_cost("aten::conv2d", shapes, types, [None, None, None, [2, 2], [3, 3], [1, 1], 1])
    assert cost.missing == "" and cost.flops == 2 * 8 * 64 * 112 * 112 * 3 * 49 == 1_888_223_232
    # bytes: input 8·3·224·224 + weight 64·3·49 + output 8·64·112·112, 4 B each
    assert cost.bytes == 4 * (8 * 3 * 224 * 224 + 64 * 3 * 49 + 8 * 64 * 112 * 112)


def test_chrome_trace_text_arguments_cost_the_same_as_live_values() -> None:
    shapes, types = CONV_7x7
    live = op_cost("aten::conv2d", shapes, types, [None, None, None, [2, 2], [3, 3], [1, 1], 1])
    text = op_cost("aten::conv2d", shapes, types, ["", "", "", "[2, 2]", "[3, 3]", "[1, 1]", "1"])
    assert text == live
    assert concrete_values(["", "[True, True, False]", "1.0000000000000001e-05", "False", "cuda:0"]) == \
        [None, [True, True, False], 1.0000000000000001e-05, False, "cuda:0"]


@pytest.mark.parametrize("concrete", [None, [], ["", "", "", "", "", "", ""], [None, None, None, [2, 2]]])
def test_conv_without_recorded_stride_or_padding_is_nan_not_a_default(concrete: list | None) -> None:
    shapes, types = CONV_7x7
    cost = op_cost("aten::conv2d", shapes, types, concrete)
    assert math.isnan(cost.flops) and math.isnan(cost.bytes)
    assert cost.missing == CONV_ARGS_UNRECORDED == "conv stride/padding not recorded"


def test_conv_positions_differ_per_aten_op() -> None:
    # 1·3·8·8 input, 4·3·3·3 weight, stride 2 padding 1: P = Q = (8 + 2 − 3)//2 + 1 = 4;
    # 2·1·4·4·4·3·9 = 3,456 FLOP whichever op carries the call
    x = [[1, 3, 8, 8], [4, 3, 3, 3]]
    expect = 2 * 1 * 4 * 4 * 4 * 3 * 9
    calls = {
        "aten::convolution": [None, None, None, [2, 2], [1, 1], [1, 1], False, [0, 0], 1],
        "aten::mkldnn_convolution": [None, None, None, [1, 1], [2, 2], [1, 1], 1],  # padding before stride
        "aten::cudnn_convolution": [None, None, [1, 1], [2, 2], [1, 1], 1, False, False, True],
    }
    types = {"aten::cudnn_convolution": ["float", "float", "ScalarList"]}
    for op, concrete in calls.items():
        shapes = x + [[]] * (len(concrete) - 2)
        t = types.get(op, ["float", "float", ""]) + ["Scalar"] * (len(concrete) - 3)
        assert op_cost(op, shapes, t, concrete).flops == expect, op
    # transposed: weight [C=3, K/groups=4, 3, 3], stride 2 padding 1 output_padding 1: out = (8 − 1)·2 − 2 +
    # (3 − 1) + 1 + 1 = 16; each input point scatters into K·R·S: 2·N·C·8·8·K·9 = 2·1·3·64·4·9 = 13,824
    transposed = op_cost("aten::convolution", [[1, 3, 8, 8], [3, 4, 3, 3]] + [[]] * 7, ["float"] * 9,
                         [None, None, None, [2, 2], [1, 1], [1, 1], True, [1, 1], 1])
    assert transposed.flops == 13_824 and transposed.formula == "convolution", transposed.missing


def test_grouped_conv_reads_groups_from_the_weight() -> None:
    # [2, 8, 16, 16] input, weight [8, 4, 3, 3] -> groups = 8/4 = 2; padding 1: 16×16 out;
    # 2·2·8·16·16·4·9 = 294,912 FLOP (FlopCounterMode says the same for the forward)
    cost = op_cost("aten::conv2d", [[2, 8, 16, 16], [8, 4, 3, 3], []], ["float", "float", ""],
                   [None, None, None, [1, 1], [1, 1], [1, 1], 2])
    assert cost.flops == 294_912 and "groups=2" in cost.label


def test_conv_backward_grads() -> None:
    # dY [2, 8, 16, 16], X [2, 8, 16, 16], W [8, 8, 3, 3]: each grad 2·2·8·16·16·8·9 = 589,824;
    # dX + dW = 1,179,648 (= FlopCounterMode's count, see the torch test below), dB = 2·8·16·16 = 4,096 adds
    base = [[2, 8, 16, 16], [2, 8, 16, 16], [8, 8, 3, 3]] + [[]] * 8
    types = ["float"] * 3 + ["ScalarList"] * 4 + ["Scalar", "ScalarList", "Scalar", "ScalarList"]

    def cost(mask: list[bool]) -> float:
        return op_cost("aten::convolution_backward", base, types,
                       [None, None, None, [8], [1, 1], [1, 1], [1, 1], False, [0, 0], 1, mask]).flops

    assert cost([True, True, False]) == 2 * 589_824
    assert cost([True, True, True]) == 2 * 589_824 + 4_096
    assert cost([False, True, False]) == 589_824
    unrecorded = op_cost("aten::convolution_backward", base, types, None)
    assert math.isnan(unrecorded.flops) and "not recorded" in unrecorded.missing
    # cudnn_convolution_backward_input(self_size, grad_output, weight, padding, …) (torch ≤ 1.10)
    old = op_cost("aten::cudnn_convolution_backward_input", [[], [2, 8, 16, 16], [8, 8, 3, 3]] + [[]] * 7,
                  ["ScalarList", "float", "float"] + ["ScalarList"] * 3 + ["Scalar"] * 4,
                  [[2, 8, 16, 16], None, None, [1, 1], [1, 1], [1, 1], 1, False, False, True])
    assert old.flops == 589_824


def test_grouped_conv_backward_counts_each_group_once() -> None:
    # groups 2, W [8, 4, 3, 3]: dX = dW = 2·2·8·16·16·4·9 = 294,912 each -> 589,824.
    # torch's FlopCounterMode says 884,736: its weight-grad count uses all C = 8 input channels per output
    # channel (C·K instead of (C/groups)·K), i.e. groups× the multiply-adds a grouped weight gradient does.
    cost = op_cost("aten::convolution_backward", [[2, 8, 16, 16], [2, 8, 16, 16], [8, 4, 3, 3]] + [[]] * 8,
                   ["float"] * 3,
                   [None, None, None, [8], [1, 1], [1, 1], [1, 1], False, [0, 0], 2, [True, True, False]])
    assert cost.flops == 589_824


def test_conv_forward_and_backward_match_flop_counter_mode() -> None:
    torch = pytest.importorskip("torch")
    from torch.utils.flop_counter import FlopCounterMode

    x = torch.randn(2, 3, 32, 32, requires_grad=True)
    w = torch.randn(8, 3, 7, 7, requires_grad=True)
    with FlopCounterMode(display=False) as fwd:
        y = torch.nn.functional.conv2d(x, w, stride=2, padding=3)
    with FlopCounterMode(display=False) as bwd:
        y.backward(torch.ones_like(y))
    shapes = [[2, 3, 32, 32], [8, 3, 7, 7], [], [], [], [], []]
    ours = op_cost("aten::conv2d", shapes, ["float", "float", ""],
                   [None, None, None, [2, 2], [3, 3], [1, 1], 1])
    # 2·2·8·16·16·3·49 = 1,204,224
    assert ours.flops == fwd.get_total_flops() == 1_204_224
    grads = op_cost("aten::convolution_backward", [[2, 8, 16, 16], [2, 3, 32, 32], [8, 3, 7, 7]] + [[]] * 8,
                    ["float"] * 3,
                    [None, None, None, None, [2, 2], [3, 3], [1, 1], False, [0, 0], 1, [True, True, False]])
    assert grads.flops == bwd.get_total_flops() == 2 * 1_204_224
