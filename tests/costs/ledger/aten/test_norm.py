"""The batch norm readers, forward and backward, by hand."""

from __future__ import annotations

from nsroof.costs.ledger.aten import op_cost


def test_batch_norm_forward_and_backward() -> None:
    # native_batch_norm, training, affine, [2, 8, 16, 16] fp32: n = 4,096 elements, C = 8.
    # FLOPs: 7 per element (Σx, Σx² 3; normalize 2; ·γ + β 2) = 28,672, + 9 per channel = 72 -> 28,744
    # bytes: x, y 2·4·4,096 = 32,768; running mean/var read + write 4·8·4 = 128; saved mean/invstd 2·8·4 = 64;
    # γ, β 2·8·4 = 64 -> 33,024
    shapes = [[2, 8, 16, 16], [8], [8], [8], [8], [], [], []]
    types = ["float"] * 5 + ["Scalar"] * 3
    fwd = op_cost("aten::native_batch_norm", shapes, types, ["", "", "", "", "", "True", "0.1", "1e-05"])
    assert (fwd.flops, fwd.bytes) == (28_744, 33_024)
    # evaluation: 4 per element = 16,384 FLOP; x, y 32,768 + running stats read 2·8·4 = 64 + γ, β 64
    # = 32,896 B
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
