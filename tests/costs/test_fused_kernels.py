"""A fused kernel's cost from the ATen ops it fused (nsroof.costs.fused_kernels): FLOPs the sum of its nodes'
ledger FLOPs, bytes its own buffers, a node several kernels recompute counted once in all."""

from __future__ import annotations

import math
from typing import Any

from nsroof.costs.fused_kernels import FORMULA, kernel_cost, kernel_costs


def node(name: str, op: str, shapes: list[Any], dtypes: list[str], concrete: list[str]) -> dict[str, Any]:
    return {"name": name, "op": op, "shapes": shapes, "dtypes": dtypes, "concrete": concrete, "module": []}


# an RMSNorm over x[4, 64] fused in one kernel: pow, mean over the last dim, add eps, rsqrt, two muls
RMS = [
    node("pow", "aten::pow", [[4, 64], []], ["float", "Scalar"], ["", "2"]),
    node("mean", "aten::mean", [[4, 64], [], [], []], ["float", "Scalar", "Scalar", ""],
         ["", "[-1]", "True", ""]),
    node("add", "aten::add", [[4, 1], [], []], ["float", "Scalar", "Scalar"], ["", "1e-06", "1"]),
    node("rsqrt", "aten::rsqrt", [[4, 1]], ["float"], [""]),
    node("mul", "aten::mul", [[4, 64], [4, 1]], ["float", "float"], ["", ""]),
    node("mul_1", "aten::mul", [[4, 64], [64]], ["float", "float"], ["", ""]),
    node("view", "aten::view", [[4, 64], []], ["float", "Scalar"], ["", "[256]"]),
]


def record(nodes: list[dict[str, Any]], graph: str = "0.0", **extra: Any) -> dict[str, Any]:
    # reads x (4·64·4 B = 1024) and the weight (64·4 = 256); writes y (1024)
    return {"graph": graph, "kernel": "cpp_fused_mean_mul_pow_rsqrt_0", "nodes": nodes,
            "reads": {"primals_1": 1024.0, "primals_2": 256.0}, "writes": {"buf1": 1024.0}} | extra


def test_a_fused_kernel_costs_its_nodes_flops_and_its_own_buffers() -> None:
    cost = kernel_cost(record(RMS))
    # pow 256 + mean (256 adds + 4 divides) 260 + add 4 + rsqrt 4 + mul 256 + mul 256 = 1,036 FLOP;
    # the view is free
    assert cost.flops == 256 + 260 + 4 + 4 + 256 + 256 == 1036
    # bytes: the buffers it reads and writes, 1024 + 256 + 1024 (the intermediates stay inside)
    assert cost.bytes == 2304
    assert cost.formula == FORMULA and cost.precision == "fp32" and cost.known
    assert cost.label.startswith(f"{FORMULA}(6 ops via the ledger: mul×2") and "2 buffers read, 1 written" \
        in cost.label


def test_a_node_two_kernels_recompute_is_counted_once_in_all() -> None:
    pow_node = RMS[0]
    a = record([pow_node, RMS[4]], kernel="cpp_fused_a_0")
    b = record([pow_node], kernel="cpp_fused_b_1")
    costs = kernel_costs({"graph_0_cpp_fused_a_0": a, "graph_0_cpp_fused_b_1": b})
    # pow (256 FLOP) is in both: each takes half; the mul (256) is a's alone
    assert costs["graph_0_cpp_fused_a_0"].flops == 128 + 256
    assert costs["graph_0_cpp_fused_b_1"].flops == 128
    # the same node name in another graph (the backward's) is another node
    c = record([pow_node], graph="0.1")
    assert kernel_costs({"x": a, "y": c})["y"].flops == 256


def test_a_node_without_a_formula_makes_the_kernel_uncosted_naming_it() -> None:
    odd = node("nz", "aten::nonzero", [[4, 64]], ["float"], [""])
    cost = kernel_cost(record([*RMS, odd]))
    assert math.isnan(cost.flops) and math.isnan(cost.bytes)
    assert cost.missing == ("a fused kernel with an op without a formula: aten::nonzero (no formula for "
                            "aten::nonzero)")


def test_unknown_buffer_sizes_and_ambiguous_names_are_uncosted_with_the_reason() -> None:
    assert "dynamic shape" in kernel_cost(record(RMS) | {"writes": {"buf1": math.nan}}).missing
    assert "forward's and a backward's" in kernel_cost(record(RMS, ambiguous=True)).missing
    assert "not recorded" in kernel_cost({"graph": "0.0", "nodes": [], "reads": {}, "writes": {}}).missing


def test_values_made_inside_a_kernel_carry_no_flops() -> None:
    iota = node("iota", "prims::iota", [[]] * 6, ["Scalar"] * 6, ["256", "0", "1", "", "", ""])
    assert kernel_cost(record([iota, RMS[3]])).flops == 4  # the rsqrt alone
