"""aten op -> ledger cost (nsroof.costs.ledger.aten): costs only where the shape and the arguments that set
it were recorded; convolution (forward and backward), batch norm, pooling and embedding backward against
torch's own FLOP counter where it counts the op, by hand where it does not."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from nsroof.costs.ledger.aten import (
    CONV_ARGS_UNRECORDED,
    NO_SHAPES,
    READERS,
    concrete_values,
    op_cost,
    register_reader,
)
from nsroof.errors import NsroofError
from tests._paths import SHARED_FIXTURES
from tests._shared_inputs import trace_events

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
    transposed = op_cost("aten::convolution", x + [[]] * 7, ["float"] * 9,
                         [None, None, None, [2, 2], [1, 1], [1, 1], True, [0, 0], 1])
    assert "transposed" in transposed.missing


def test_grouped_conv_reads_groups_from_the_weight() -> None:
    # [2, 8, 16, 16] input, weight [8, 4, 3, 3] -> groups = 8/4 = 2; padding 1: 16×16 out;
    # 2·2·8·16·16·4·9 = 294,912 FLOP (FlopCounterMode says the same for the forward)
    cost = op_cost("aten::conv2d", [[2, 8, 16, 16], [8, 4, 3, 3], []], ["float", "float", ""],
                   [None, None, None, [1, 1], [1, 1], [1, 1], 2])
    assert cost.flops == 294_912 and "groups=2" in cost.label


def test_no_input_shapes_is_its_own_reason_for_every_aten_op() -> None:
    for op in ("aten::cudnn_convolution", "aten::mm", "aten::nonzero"):
        assert op_cost(op, None, None).missing == NO_SHAPES == "no input shapes recorded (profile with record_shapes=True)"
    # shapes recorded, no formula: the other reason
    assert op_cost("aten::nonzero", [[10]], ["float"]).missing == "no formula for aten::nonzero"


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
                   ["float"] * 3, [None, None, None, [8], [1, 1], [1, 1], [1, 1], False, [0, 0], 2, [True, True, False]])
    assert cost.flops == 589_824


def test_batch_norm_forward_and_backward() -> None:
    # native_batch_norm, training, affine, [2, 8, 16, 16] fp32: n = 4,096 elements, C = 8.
    # FLOPs: 7 per element (Σx, Σx² 3; normalize 2; ·γ + β 2) = 28,672, + 9 per channel = 72 -> 28,744
    # bytes: x, y 2·4·4,096 = 32,768; running mean/var read + write 4·8·4 = 128; saved mean/invstd 2·8·4 = 64;
    # γ, β 2·8·4 = 64 -> 33,024
    shapes = [[2, 8, 16, 16], [8], [8], [8], [8], [], [], []]
    types = ["float"] * 5 + ["Scalar"] * 3
    fwd = op_cost("aten::native_batch_norm", shapes, types, ["", "", "", "", "", "True", "0.1", "1e-05"])
    assert (fwd.flops, fwd.bytes) == (28_744, 33_024)
    # evaluation: 4 per element = 16,384 FLOP; x, y 32,768 + running stats read 2·8·4 = 64 + γ, β 64 = 32,896 B
    ev = op_cost("aten::cudnn_batch_norm", shapes, types, ["", "", "", "", "", "False", "0.1", "1e-05"])
    assert (ev.flops, ev.bytes) == (16_384, 32_896)
    assert op_cost("aten::batch_norm", shapes + [[]], types + ["Scalar"], None).missing == \
        "batch norm training flag not recorded"
    # backward, training, all grads: 5 (x̂, Σdy, Σdy·x̂) + 4 (dx) per element = 9·4,096 = 36,864 FLOP;
    # bytes: dy, x, dx 3·16,384 + saved mean/invstd 64 + γ 32 + dγ, dβ 64 = 49,312
    bwd = op_cost("aten::native_batch_norm_backward", [[2, 8, 16, 16], [2, 8, 16, 16]] + [[8]] * 5 + [[]] * 3,
                  ["float"] * 7 + ["Scalar", "Scalar", "ScalarList"],
                  [None] * 7 + [True, 1e-5, [True, True, True]])
    assert (bwd.flops, bwd.bytes) == (36_864, 49_312)


def test_pooling_forward_and_backward() -> None:
    # max_pool2d 3×3 stride 2 padding 1 on [2, 8, 16, 16]: P = Q = (16 + 2 − 3)//2 + 1 = 8; 2·8·8·8 = 1,024
    # outputs × 8 compares = 8,192 FLOP; bytes: input 2·8·16·16 = 4,096 elements·4 = 16,384 B, output
    # 1,024·4 = 4,096 B -> 20,480; with indices + 1,024·8
    shapes = [[2, 8, 16, 16], [], [], [], [], []]
    types = ["float"] + ["ScalarList"] * 4 + ["Scalar"]
    concrete = [None, [3, 3], [2, 2], [1, 1], [1, 1], False]
    mp = op_cost("aten::max_pool2d", shapes, types, concrete)
    assert (mp.flops, mp.bytes) == (8_192, 20_480)
    assert op_cost("aten::max_pool2d_with_indices", shapes, types, concrete).bytes == 20_480 + 8 * 1_024
    # ceil mode: (16 + 2 − 3)/2 = 7.5 -> 8 + 1 = 9, and window 8 starts at 16 < 16 + 1 -> kept: 9×9
    ceil = op_cost("aten::max_pool2d", shapes, types, [None, [3, 3], [2, 2], [1, 1], [1, 1], True])
    assert ceil.flops == 2 * 8 * 9 * 9 * 8
    # avg_pool2d 2×2, stride [] (= kernel): 4×4 out of 8×8: 2·8·4·4 = 256 outputs × (3 adds + 1 divide)
    ap = op_cost("aten::avg_pool2d", [[2, 8, 8, 8]] + [[]] * 6, ["float"] + ["ScalarList"] * 3 + ["Scalar"] * 3,
                 [None, [2, 2], [], [0, 0], False, True, None])
    assert ap.flops == 256 * 4
    # max backward: 1 add per dY element (1,024); bytes dY 4,096 + indices 8,192 + dX 16,384 = 28,672
    mb = op_cost("aten::max_pool2d_with_indices_backward", [[2, 8, 8, 8], [2, 8, 16, 16]] + [[]] * 5 + [[2, 8, 8, 8]],
                 ["float", "float"] + ["ScalarList"] * 4 + ["Scalar", "long int"],
                 [None, None, [3, 3], [2, 2], [1, 1], [1, 1], False, None])
    assert (mb.flops, mb.bytes) == (1_024, 28_672)
    # avg backward 2×2: 256 dY elements × (1 divide + 4 adds) = 1,280
    ab = op_cost("aten::avg_pool2d_backward", [[2, 8, 4, 4], [2, 8, 8, 8]] + [[]] * 6, ["float"] * 2,
                 [None, None, [2, 2], [2, 2], [0, 0], False, True, None])
    assert ab.flops == 1_280
    assert op_cost("aten::max_pool2d", shapes, types, None).missing == "pool kernel/stride/padding not recorded"
    # global average pool [2, 64, 7, 7] -> [1, 1]: 6,272 adds + 128 divides
    gap = op_cost("aten::adaptive_avg_pool2d", [[2, 64, 7, 7], []], ["float", "ScalarList"], [None, [1, 1]])
    assert gap.flops == 2 * 64 * 49 + 128


def test_embedding_backward_both_aten_names() -> None:
    # 20 tokens, hidden 16, table 100: 320 adds; bytes 20·8 (indices) + 320·4 (dY) + 1,600·4 (table) = 7,840
    dense = op_cost("aten::embedding_dense_backward", [[4, 5, 16], [4, 5], [], [], []],
                    ["float", "long int", "Scalar", "Scalar", "Scalar"], ["", "", "100", "-1", "False"])
    composite = op_cost("aten::embedding_backward", [[4, 5, 16], [4, 5], [], [], [], []],
                        ["float", "long int"] + ["Scalar"] * 4, ["", "", "100", "-1", "False", "False"])
    assert (dense.flops, dense.bytes) == (composite.flops, composite.bytes) == (320, 7_840)
    sparse = op_cost("aten::embedding_backward", [[4, 5, 16], [4, 5], [], [], [], []],
                     ["float", "long int"] + ["Scalar"] * 4, ["", "", "100", "-1", "False", "True"])
    assert "sparse" in sparse.missing


def test_an_aten_op_cannot_get_two_readers() -> None:
    with pytest.raises(NsroofError, match="already has a shape reader"):
        register_reader(("mm",), READERS["bmm"])
    assert READERS["mm"].__name__ == "_mm"


# --------------------------------------------------------------------------- against torch itself


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
    ours = op_cost("aten::conv2d", shapes, ["float", "float", ""], [None, None, None, [2, 2], [3, 3], [1, 1], 1])
    # 2·2·8·16·16·3·49 = 1,204,224
    assert ours.flops == fwd.get_total_flops() == 1_204_224
    grads = op_cost("aten::convolution_backward", [[2, 8, 16, 16], [2, 3, 32, 32], [8, 3, 7, 7]] + [[]] * 8,
                    ["float"] * 3, [None, None, None, None, [2, 2], [3, 3], [1, 1], False, [0, 0], 1, [True, True, False]])
    assert grads.flops == bwd.get_total_flops() == 2 * 1_204_224


def test_a_real_profiler_trace_is_costed_from_its_recorded_arguments(tmp_path: Path) -> None:
    """torch.profiler(record_shapes=True) on a small CNN: every conv, norm and pool op of the chrome trace
    gets a cost from its Concrete Inputs, equal to the cost from the live events."""
    torch = pytest.importorskip("torch")
    from torch.profiler import profile

    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 7, stride=2, padding=3), torch.nn.BatchNorm2d(8), torch.nn.ReLU(),
                              torch.nn.MaxPool2d(3, 2, 1), torch.nn.AvgPool2d(2))
    x = torch.randn(2, 3, 32, 32, requires_grad=True)
    with profile(record_shapes=True) as prof:
        net(x).sum().backward()
    path = tmp_path / "cnn.json"
    prof.export_chrome_trace(str(path))
    events = [e for e in json.loads(path.read_text())["traceEvents"] if e.get("cat") == "cpu_op"]
    wanted = ("aten::conv2d", "aten::convolution_backward", "aten::native_batch_norm", "aten::native_batch_norm_backward",
              "aten::max_pool2d_with_indices", "aten::max_pool2d_with_indices_backward", "aten::avg_pool2d",
              "aten::avg_pool2d_backward")
    from_trace = {}
    for e in events:
        if e["name"] in wanted:
            a = e["args"]
            from_trace[e["name"]] = op_cost(e["name"], a["Input Dims"], a["Input type"], a["Concrete Inputs"])
    assert set(from_trace) == set(wanted)
    assert all(c.known for c in from_trace.values()), {k: c.missing for k, c in from_trace.items()}
    # conv 7×7/2 pad 3: 16×16 out, 2·2·8·256·3·49 = 1,204,224 + bias 2·8·256 = 4,096
    assert from_trace["aten::conv2d"].flops == 1_204_224 + 4_096
    live = {e.name: op_cost(e.name, e.input_shapes, e.input_dtypes, e.concrete_inputs)
            for e in prof.events() if e.name == "aten::conv2d"}
    assert live["aten::conv2d"].flops == from_trace["aten::conv2d"].flops


# --------------------------------------------------------------------------- the shared real traces


def _traces() -> list[Path]:
    folder = SHARED_FIXTURES / "traces"
    return sorted(folder.glob("*.json*")) if folder.is_dir() else []


@pytest.mark.skipif(not _traces(), reason="shared fixtures not present")
def test_no_shared_trace_op_is_costed_from_an_assumed_argument() -> None:
    """Every costed op of the real traces: recomputed with its recorded scalar arguments removed, it must
    either keep its cost (the formula needs only shapes) or become NaN — never a cost from a default."""
    costed = 0
    for path in _traces():
        for e in trace_events(path):  # the JSON's events, decoded once per process
            if e.get("cat") not in ("cpu_op", "Operator"):
                continue
            a = e.get("args") or {}
            cost = op_cost(str(e.get("name", "")), a.get("Input Dims"), a.get("Input type"), a.get("Concrete Inputs"))
            if not cost.known:
                continue
            costed += 1
            bare = op_cost(str(e.get("name", "")), a.get("Input Dims"), a.get("Input type"), None)
            assert not bare.known or (bare.flops, bare.bytes) == (cost.flops, cost.bytes), e["name"]
    assert costed > 0
