"""The reduction readers that write something else than their input's dtype: argmax/argmin's int64 indices."""

from __future__ import annotations

from nsroof.costs.ledger.aten import op_cost


def test_argmax_reads_its_input_once_and_writes_int64_indices() -> None:
    # SGLang's greedy sampling: argmax(logits [32, 151936] fp32, dim=-1): 1 compare per element
    # (4,861,952 FLOP); read 4,861,952·4 B, write 32 int64 indices (256 B) = 19,448,064 B
    cost = op_cost("aten::argmax", [[32, 151936], [], []], ["float", "Scalar", "Scalar"], ["", "-1", "False"])
    assert (cost.flops, cost.bytes) == (32 * 151936, 32 * 151936 * 4 + 32 * 8) == (4_861_952, 19_448_064)
    # argmin over everything (dim None: the whole tensor to one index)
    whole = op_cost("aten::argmin", [[16, 4], [], []], ["c10::BFloat16", "", "Scalar"], ["", "", "False"])
    assert (whole.flops, whole.bytes) == (64, 64 * 2 + 8)
    # a dim passed but not recorded: no cost from an assumed dim
    assert not op_cost("aten::argmax", [[32, 8], [], []], ["float", "Scalar", "Scalar"], None).known
