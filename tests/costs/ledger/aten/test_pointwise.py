"""The elementwise readers' bytes: the output at the promoted dtype; an out= tensor written, not read."""

from __future__ import annotations

from nsroof.costs.ledger.aten import op_cost


def test_promotion_sizes_the_output_at_the_promoted_dtype() -> None:
    # fp16 [1024] + fp32 [1024] -> fp32 output: read 1024·2 + 1024·4, write 1024·4 = 10,240 B
    cost = op_cost("aten::add", [[1024], [1024], []], ["c10::Half", "float", "Scalar"], [None, None, 1])
    assert cost.bytes == 1024 * 2 + 1024 * 4 + 1024 * 4 == 10_240
    # in place, the output keeps self's dtype: fp16 self += fp32 other: read 2048 + 4096, write 2048
    inplace = op_cost("aten::add_", [[1024], [1024], []], ["c10::Half", "float", "Scalar"], [None, None, 1])
    assert inplace.bytes == 1024 * 2 + 1024 * 4 + 1024 * 2


def test_out_argument_is_written_not_read() -> None:
    # torch.mul(a, b, out=o), 4096 fp32 each: read a, b (2·16,384 B), write o (16,384 B) = 49,152 B
    cost = op_cost("aten::mul", [[4096], [4096], [4096]], ["float"] * 3, [None, None, None])
    assert cost.bytes == 3 * 4096 * 4 == 49_152 and cost.flops == 4096


def test_masked_fill_reads_self_and_the_broadcast_mask() -> None:
    # vLLM's masked_fill_(x [888, 2880] bf16, mask [888, 1] bool, 0): 1 select per element (2,557,440 FLOP);
    # read x and write it back (2·2,557,440·2 B) + the mask once (888·1 B) = 10,230,648 B
    cost = op_cost("aten::masked_fill_", [[888, 2880], [888, 1], []], ["c10::BFloat16", "bool", "Scalar"],
                   ["", "", "0"])
    assert (cost.flops, cost.bytes) == (888 * 2880, 2 * 888 * 2880 * 2 + 888) == (2_557_440, 10_230_648)
    functional = op_cost("aten::masked_fill", [[4, 8], [4, 8], []], ["float", "bool", "Scalar"],
                         ["", "", "1"])
    assert (functional.flops, functional.bytes) == (32, 32 * 4 + 32 + 32 * 4)
