"""The embedding backward readers, by hand."""

from __future__ import annotations

from nsroof.costs.ledger.aten import op_cost


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
