"""nsroof.importers.nsys.op_text: PyTorch's emit_nvtx range texts read back (torch/csrc/profiler/util.cpp,
getNvtxStr)."""

from __future__ import annotations

import pytest

from nsroof.importers.nsys.op_text import OpText, parse


def test_an_op_with_its_sequence_number_and_input_sizes() -> None:
    text = "aten::addmm, seq = 12, op_id = 40, sizes = [[256], [64, 128], [128, 256], [], []]"
    assert parse(text) == OpText("aten::addmm", 12, [[256], [64, 128], [128, 256], [], []], False)
    # the producers of its inputs are read past, whatever they say
    assert parse(text + ", input_op_ids = [(3,0), (7,0)]") == parse(text)


def test_backward_ranges_and_ops_named_alone() -> None:
    assert parse("MmBackward0, stashed seq = 7") == OpText("MmBackward0", 7, None, True)  # PyTorch 1.x
    assert parse("aten::empty") == OpText("aten::empty", None, None, False)  # no sequence number
    assert parse("aten::zeros, op_id = 3") == OpText("aten::zeros", None, None, False)
    # a shared sizes text gives one list (a long run repeats a few hundred shapes)
    a, b = (parse(f"aten::mm, seq = {k}, sizes = [[2, 3], [3, 4]]") for k in (1, 2))
    assert a is not None and b is not None and a.input_dims is b.input_dims


@pytest.mark.parametrize("text", [
    "layer_3", "forward pass", "", "step_0, epoch 1",
    # brackets that are no list of shapes: a user's text, never an op with wrong sizes
    "aten::mm, seq = 1, sizes = [[1, 2]", "aten::mm, seq = 1, sizes = [1, 2]",
    "aten::mm, seq = 1, sizes = [[[1]]]", "aten::mm, seq = 1, sizes = [[1, 2], [3, ]]",
])
def test_anything_else_is_an_annotation(text: str) -> None:
    assert parse(text) is None
