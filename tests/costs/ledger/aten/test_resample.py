"""The pooling and upsample readers, forward and backward, by hand."""

from __future__ import annotations

from nsroof.costs.ledger.aten import op_cost


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
    ap = op_cost("aten::avg_pool2d", [[2, 8, 8, 8]] + [[]] * 6,
                 ["float"] + ["ScalarList"] * 3 + ["Scalar"] * 3,
                 [None, [2, 2], [], [0, 0], False, True, None])
    assert ap.flops == 256 * 4
    # max backward: 1 add per dY element (1,024); bytes dY 4,096 + indices 8,192 + dX 16,384 = 28,672
    mb = op_cost("aten::max_pool2d_with_indices_backward",
                 [[2, 8, 8, 8], [2, 8, 16, 16]] + [[]] * 5 + [[2, 8, 8, 8]],
                 ["float", "float"] + ["ScalarList"] * 4 + ["Scalar", "long int"],
                 [None, None, [3, 3], [2, 2], [1, 1], [1, 1], False, None])
    assert (mb.flops, mb.bytes) == (1_024, 28_672)
    # avg backward 2×2: 256 dY elements × (1 divide + 4 adds) = 1,280
    ab = op_cost("aten::avg_pool2d_backward", [[2, 8, 4, 4], [2, 8, 8, 8]] + [[]] * 6, ["float"] * 2,
                 [None, None, [2, 2], [2, 2], [0, 0], False, True, None])
    assert ab.flops == 1_280
    assert (op_cost("aten::max_pool2d", shapes, types, None).missing
            == "pool kernel/stride/padding not recorded")
    # global average pool [2, 64, 7, 7] -> [1, 1]: 6,272 adds + 128 divides
    gap = op_cost("aten::adaptive_avg_pool2d", [[2, 64, 7, 7], []], ["float", "ScalarList"], [None, [1, 1]])
    assert gap.flops == 2 * 64 * 49 + 128


def test_upsample_bilinear_by_hand() -> None:
    # 2·3 planes of 8×8 -> 16×16: 7 FLOP per output (4 multiplies + 3 adds): 6·256·7 = 10,752;
    # bytes: read 6·64·4 + write 6·256·4 = 1,536 + 6,144
    cost = op_cost("aten::upsample_bilinear2d", [[2, 3, 8, 8], [], [], []], ["float", "", "", ""],
                   [None, None, False, [2.0, 2.0]])
    assert cost.flops == 6 * 256 * 7 and cost.bytes == 1_536 + 6_144
