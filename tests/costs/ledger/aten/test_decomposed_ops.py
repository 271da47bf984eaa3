"""Readers of the ops Inductor's decompositions leave in a compiled graph (what its fused kernels are priced
by: nsroof.costs.fused_kernels): comparisons and logic ops, amax/amin, the masked index-put of an embedding's
backward."""

from __future__ import annotations

from nsroof.costs.ledger.aten import op_cost
from nsroof.costs.ledger.aten.movement import INDICES_UNRECORDED


def test_a_comparison_reads_its_inputs_and_writes_bools() -> None:
    ge = op_cost("aten::ge", [[128, 256], []], ["float", "Scalar"], ["", "0"])
    # 32,768 compares; reads the fp32 input (32,768·4 = 131,072 B), writes one byte per element (32,768)
    assert (ge.flops, ge.bytes) == (32768, 131072 + 32768)
    both = op_cost("aten::bitwise_and", [[128, 256], [128, 256]], ["bool", "bool"], ["", ""])
    # two bool inputs and a bool output, not an out= call: 3 · 32,768 B
    assert (both.flops, both.bytes) == (32768, 3 * 32768)


def test_amax_is_a_reduction_of_one_compare_per_element() -> None:
    amax = op_cost("aten::amax", [[128, 256], [], []], ["float", "Scalar", "Scalar"], ["", "[1]", "True"])
    # 32,768 compares into 128 outputs: reads 131,072 B, writes 512 B
    assert (amax.flops, amax.bytes) == (32768, 131072 + 512) and amax.formula == "reduction"


def test_the_masked_index_put_of_an_embedding_backward() -> None:
    # self [256, 64] fp32, mask [4, 32, 1] bool, indices [[4, 32]] int64, values [4, 32, 64]
    shapes = [[256, 64], [4, 32, 1], [[4, 32]], [4, 32, 64]]
    cost = op_cost("aten::_unsafe_masked_index_put_accumulate", shapes,
                   ["float", "bool", "long int", "float"], ["", "", "", ""])
    # 8,192 adds; reads the values and the indexed rows (2 · 8,192 · 4 B), the indices (128 · 8) and the
    # mask (128 · 1), writes the indexed rows (8,192 · 4)
    assert cost.flops == 8192
    assert cost.bytes == 2 * 8192 * 4 + 128 * 8 + 128 + 8192 * 4
    # a profiler's trace records no dtype for a tensor list: nothing assumed
    unknown = op_cost("aten::_unsafe_masked_index_put_accumulate", shapes,
                      ["float", "bool", "TensorList", "float"], ["", "", "", ""])
    assert unknown.missing == INDICES_UNRECORDED


def test_layer_norm_and_gelu_as_a_compiled_graph_holds_them() -> None:
    var_mean = op_cost("aten::var_mean", [[8, 64, 128], [], [], []], ["float", "Scalar", "Scalar", "Scalar"],
                       ["", "[2]", "0", "True"])
    # 65,536 elements into 512 rows: mean 1 add, variance subtract + square + add per element (4 · 65,536),
    # and one divide for each of the 2 · 512 outputs; reads 262,144 B, writes 2 · 512 · 4
    assert (var_mean.flops, var_mean.bytes) == (4 * 65536 + 1024, 262144 + 4096)
    assert op_cost("aten::erf", [[8, 64, 512]], ["float"], [""]).flops == 262144
    # the backward of a qkv unbind: src written into one slice of a zeros [3, …] tensor, no arithmetic;
    # the output (3 · 65,536 fp32) read and written once
    scatter = op_cost("aten::select_scatter", [[3, 8, 4, 64, 32], [8, 4, 64, 32], [], []],
                      ["float", "float", "Scalar", "Scalar"], ["", "", "0", "1"])
    assert (scatter.flops, scatter.bytes) == (0, 2 * 3 * 65536 * 4)
