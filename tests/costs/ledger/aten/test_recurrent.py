"""The recurrent layer readers, by hand."""

from __future__ import annotations

from nsroof.costs.ledger.aten import op_cost


def test_lstm_layer_by_hand() -> None:
    # mkldnn_rnn_layer, LSTM (mode 2), seq 16, batch 4, input 32, hidden 64: gate matmuls
    # 2·16·4·4·64·(32 + 64) = 3,145,728; bias adds 2·16·4·256 = 32,768; cell 15·16·4·64 = 61,440
    shapes = [[16, 4, 32], [256, 32], [256, 64], [256], [256], [4, 64], [4, 64]] + [[]] * 9
    concrete = [None] * 7 + [False, [], 2, 64, 1, True, False, False, True]
    cost = op_cost("aten::mkldnn_rnn_layer", shapes, ["float"] * 7 + ["Scalar"] * 9, concrete)
    assert cost.flops == 3_145_728 + 32_768 + 61_440
