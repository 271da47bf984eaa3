"""nsroof.costs.op_table: the ops table's costs and units, computed once per distinct call and a tree level at
a time for all ops, are those of pricing each op by itself (op_cost) and walking up its parents one by one."""

from __future__ import annotations

import copy
import math
import random
from typing import Any

import numpy as np
import pandas as pd

from nsroof.costs.ledger.aten import OpCost, op_cost
from nsroof.costs.op_table import _LEVELS, OpTable, _repr_codes
from nsroof.schema import OP_COLUMNS

# (name, Input Dims, Input type): known costs (add, mm), none (a view; no shapes; no formula; an engine op)
CALLS: list[tuple[str, Any, Any]] = [
    ("aten::add", [[4, 8], [4, 8], []], ["float", "float", "Scalar"]),
    ("aten::add", [[2, 8], [2, 8], []], ["float", "float", "Scalar"]),
    ("aten::mm", [[4, 8], [8, 16]], ["float", "float"]),
    ("aten::view", [[4, 8], [2]], ["float", "ScalarList"]),
    ("aten::add", None, None),
    ("aten::linear", [[4, 8], [16, 8], [16]], ["float", "float", "float"]),
    ("detach", [[4, 8]], ["float"]),
    ("autograd::engine::evaluate_function: AddBackward0", [], []),
]


def ops_frame(rows: list[tuple[int, int, int]], starts: list[float] | None = None,
              calls: list[tuple[str, Any, Any]] = CALLS) -> pd.DataFrame:
    """An ops table (OP_COLUMNS) of (op_id, parent_op_id or -1, index into `calls`) rows."""
    n = len(rows)
    data: dict[str, Any] = {c: [None] * n for c in OP_COLUMNS}
    data["op_id"] = [r[0] for r in rows]
    data["parent_op_id"] = [r[1] if r[1] != -1 else None for r in rows]
    data["name"] = [calls[r[2]][0] for r in rows]
    data["input_shapes"] = [calls[r[2]][1] for r in rows]
    data["input_dtypes"] = [calls[r[2]][2] for r in rows]
    data["start_us"] = starts if starts is not None else [float(i) for i in range(n)]
    data["duration_us"] = [1.0] * n
    data["nvtx_path"] = [""] * n
    return pd.DataFrame({c: pd.Series(v, dtype=OP_COLUMNS[c][0]) for c, v in data.items()})


def forest(seed: int, hostile: bool = True) -> list[tuple[int, int, int]]:
    """Random nesting with parents missing from the table; `hostile`: also a two-op cycle without a cost and
    a chain deeper than the levels walked at once over a costed root."""
    rng = random.Random(seed)
    rows = [(10, -1, 0)]
    for op_id in range(11, 300):
        parent = rng.choice([-1, 999, *(r[0] for r in rows[-20:])])
        rows.append((op_id, parent, rng.randrange(len(CALLS))))
    if hostile:
        rows += [(500, 501, 3), (501, 500, 6)]
        rows += [(600, -1, 2)] + [(601 + d, 600 + d, 3) for d in range(_LEVELS + 10)]
    return rows


def reference_unit(rows: list[tuple[int, int, int]], op_id: int) -> int:
    """The innermost op at or above op_id whose op_cost is known, walking parents one by one (each op
    once)."""
    parent = {r[0]: r[1] for r in rows}
    call = {r[0]: CALLS[r[2]] for r in rows}
    seen: set[int] = set()
    while op_id in parent and op_id >= 0 and op_id not in seen:
        if op_cost(*call[op_id]).known:
            return op_id
        seen.add(op_id)
        op_id = parent[op_id]
    return -1


def same_cost(a: OpCost, b: OpCost) -> bool:
    nan = (math.isnan(a.flops) and math.isnan(b.flops)) and (math.isnan(a.bytes) and math.isnan(b.bytes))
    return (nan or (a.flops, a.bytes) == (b.flops, b.bytes)) and (
        (a.label, a.missing, a.precision, a.formula) == (b.label, b.missing, b.precision, b.formula))


def test_units_walked_together_are_each_ops_own_walk(monkeypatch: Any) -> None:
    for seed in range(3):
        rows = forest(seed, hostile=False)
        table = OpTable(ops_frame(rows))
        monkeypatch.setattr(table, "unit", None)  # every chain finishes in the walk together
        ids = [r[0] for r in rows]
        assert table.units_at(table.rows_of(np.array(ids))).tolist() == [reference_unit(rows, j) for j in ids]


def test_a_cycle_or_a_chain_deeper_than_the_levels_walked_together_finishes_one_by_one() -> None:
    rows = forest(3)
    table = OpTable(ops_frame(rows))
    ids = [r[0] for r in rows]
    units = table.units_at(table.rows_of(np.array(ids)))
    assert units.tolist() == [reference_unit(rows, j) for j in ids]
    # the deep chain ends on its costed root (aten::mm); the cycle has no cost
    assert units[-1] == 600 and units[ids.index(500)] == -1


def reference_enclosing(rows: list[tuple[int, int, int]], op_id: int) -> list[int]:
    """The ops enclosing op_id, innermost first, walking parents one by one (each op once)."""
    parent = {r[0]: r[1] for r in rows}
    out: list[int] = []
    j = parent.get(op_id, -1)
    while j in parent and j >= 0 and j not in out and j != op_id:
        out.append(j)
        j = parent[j]
    return out


def test_outermost_costed_walked_together_is_each_ops_own_walk() -> None:
    # hostile: a cycle, a chain deeper than the levels
    for seed, hostile in ((0, False), (1, False), (3, True)):
        rows = forest(seed, hostile=hostile)
        table = OpTable(ops_frame(rows))
        ids = [r[0] for r in rows]
        known = {r[0] for r in rows if op_cost(*CALLS[r[2]]).known}
        expected = [next((j for j in reversed([i, *reference_enclosing(rows, i)]) if j in known), -1)
                    for i in ids]
        assert table.outermost_costed_at(table.rows_of(np.array(ids))).tolist() == expected
    assert expected[-1] == 600  # the deep chain: its costed root


def test_ops_with_a_costed_op_inside_are_marked_once_each() -> None:
    for seed, hostile in ((0, False), (3, True)):
        rows = forest(seed, hostile=hostile)
        table = OpTable(ops_frame(rows))
        known = [i for i, r in enumerate(rows) if op_cost(*CALLS[r[2]]).known]
        inside = {j for i in known for j in reference_enclosing(rows, rows[i][0])}
        marked = table.costed_inside(np.array(known, dtype="int64"))
        assert {rows[i][0] for i in np.flatnonzero(marked).tolist()} == inside
    # the deep chain's costed root has nothing costed inside
    assert not marked[[r[0] for r in rows].index(600)]
    # a costed op at the bottom of a chain deeper than the levels walked at once marks the whole chain
    chain = [(700, -1, 3)] + [(701 + d, 700 + d, 3) for d in range(_LEVELS + 10)]
    chain.append((900, chain[-1][0], 2))
    table = OpTable(ops_frame(chain))
    assert table.costed_inside(np.array([len(chain) - 1])).tolist() == [True] * (len(chain) - 1) + [False]
    assert not table.costed_inside(np.zeros(0, dtype="int64")).any()


def test_every_op_is_priced_as_op_cost_prices_it_alone() -> None:
    rows = forest(7)
    frame = ops_frame(rows)
    # half the calls with arguments of their own (equal lists, other objects), half sharing them as a decoder
    # does
    for column in ("input_shapes", "input_dtypes"):
        frame[column] = [copy.deepcopy(v) if i % 2 else v for i, v in enumerate(frame[column])]
    table = OpTable(frame)
    costs = table.costs_at(np.arange(len(rows)))
    for r, cost in zip(rows, costs.tolist(), strict=True):
        assert same_cost(cost, op_cost(*CALLS[r[2]])), r
    # equal calls share one priced cost, which a lookup of one op answers
    same = [i for i, r in enumerate(rows) if r[2] == 0]
    assert len(same) > 2 and all(costs[i] is costs[same[0]] for i in same)
    assert table.cost(rows[same[1]][0]) is costs[same[0]]


def test_a_table_whose_op_ids_repeat_walks_by_op_id_as_before() -> None:
    rows = [(1, -1, 2), (2, 1, 3), (2, -1, 3), (3, 2, 3)]  # op 2 twice: its last row (no parent) counts
    table = OpTable(ops_frame(rows))
    assert table.units_at(table.rows_of(np.array([1, 2, 3]))).tolist() == [1, -1, -1]
    assert [table.unit(j) for j in (1, 2, 3)] == [1, -1, -1]
    assert table.outermost_costed_at(table.rows_of(np.array([1, 2, 3]))).tolist() == [1, -1, -1]
    assert table.costed_inside(np.array([0])).tolist() == [False] * 4  # op 1 (aten::mm) has nothing around it


def test_children_are_the_direct_children_in_start_order() -> None:
    rows = [(1, -1, 3), (2, 1, 3), (3, 1, 3), (4, 1, 3), (5, 2, 3), (6, 1, 3)]
    starts = [0.0, 5.0, 2.0, float("nan"), 6.0, 2.0]  # a tie keeps table order; NaN starts last
    table = OpTable(ops_frame(rows, starts))
    assert table.children(1) == [3, 6, 2, 4]
    assert table.children(2) == [5] and table.children(5) == [] and table.children(42) == []


def test_arguments_code_alike_where_their_reprs_are_whatever_the_objects() -> None:
    shared = [[4, 8], [8]]
    values = np.empty(6, dtype=object)
    values[:] = [shared, [[4, 8], [8]], shared, ((4, 8), (8,)), None, [[4, 8], [8.0]]]
    codes, texts = _repr_codes(values)
    assert codes.tolist() == [0, 0, 0, 1, 2, 3]  # a tuple, None and a float are other calls
    assert texts == [repr(shared), "((4, 8), (8,))", "None", "[[4, 8], [8.0]]"]


BF16 = "c10::BFloat16"
# an op called again inside itself: at other floating dtypes (autocast), or as another overload (more
# arguments; a Scalar made a tensor), or alike
REDISPATCH_CALLS: list[tuple[str, Any, Any]] = [
    ("aten::linear", [[4, 8], [16, 8], [16]], ["float", "float", "float"]),
    ("aten::linear", [[4, 8], [16, 8], [16]], [BF16, BF16, BF16]),
    ("aten::linear", [[4, 8], [16, 8], [16]], [BF16, "float", "float"]),  # x already bf16, W and b cast
    ("aten::nan_to_num", [[4, 8]], ["float"]),
    ("aten::nan_to_num", [[4, 8], [4, 8]], ["float", "float"]),  # the out= overload
    ("aten::add", [[4, 8], [], []], ["float", "Scalar", "Scalar"]),
    ("aten::add", [[4, 8], [], []], ["float", "double", "Scalar"]),  # the Scalar wrapped as a tensor
    ("aten::sum", [[4, 8], []], ["float", ""]),
    ("aten::linear", [[2, 8], [16, 8], [16]], [BF16, BF16, BF16]),  # other shapes
    ("aten::linear", [[4, 8], [16, 8], [16]], ["c10::Half", "c10::Half", "c10::Half"]),
]


def test_an_op_called_again_inside_itself_at_other_floating_dtypes_is_redispatched() -> None:
    rows = [(1, -1, 0), (2, 1, 1),  # autocast: fp32 linear -> bf16 linear
            (3, -1, 2), (4, 3, 1),  # bf16 input, fp32 weight -> bf16 linear
            (5, -1, 3), (6, 5, 4),  # nan_to_num -> nan_to_num.out: another overload
            (7, -1, 5), (8, 7, 6),  # add.Scalar -> add.Tensor with a double scalar tensor
            (9, -1, 7), (10, 9, 7),  # alike: no cast
            (11, -1, 0), (12, 11, 8),  # other shapes
            (13, -1, 0), (14, 13, 3), (15, 13, 9)]  # a child of another name; fp16 after it
    table = OpTable(ops_frame(rows, calls=REDISPATCH_CALLS))
    every = np.arange(len(rows))
    found = table.redispatched(table.known_at(every))
    assert [rows[i][0] for i in np.flatnonzero(found).tolist()] == [1, 3, 13]
    # only where the call inside has a cost: the outer call's is not dropped for none
    inner_unknown = table.known_at(every) & ~np.isin(table.ids, [2, 4])
    assert [rows[i][0] for i in np.flatnonzero(table.redispatched(inner_unknown)).tolist()] == [13]
    # the outermost walk skips them: the inner call is the outermost costed op at and inside it
    assert table.outermost_costed_at(table.rows_of(np.array([1, 2, 4])), skip=found).tolist() == [-1, 2, 4]
    assert table.outermost_costed_at(table.rows_of(np.array([1, 2, 4]))).tolist() == [1, 1, 3]
    assert [table.outermost_costed(j, found) for j in (1, 2, 4)] == [-1, 2, 4]  # one by one, as walked


STEP = "execute_32_context_0(sq0sk0sqsq0sqsk0)_generation_32(sq32sk55086sqsq32sqsk55086)"
ENGINE_CALLS: list[tuple[str, Any, Any]] = [
    ("vllm::unified_attention_with_output",
     [[32, 64, 64], [32, 8, 64], [32, 8, 64], [32, 64, 64], [], [], []],
     ["c10::BFloat16"] * 4 + ["", "", ""]),
    ("vllm::moe_forward", [[32, 3072], [32, 32], []], ["c10::BFloat16", "c10::BFloat16", ""]),
    ("SortTokens", [[32, 4], [32, 4], []], ["c10::BFloat16", "short int", "Scalar"]),
    ("aten::view", [[32, 1536, 5888], []], ["unsigned char", "ScalarList"]),
    ("aten::view", [[32, 1472, 3072], []], ["unsigned char", "ScalarList"]),
]


def test_a_captured_engine_op_takes_the_step_its_replay_ran_under() -> None:
    # an attention op recorded at a CUDA graph's capture (its path holds no step annotation); its kernel,
    # replayed, carries the replay's path: the step it gives costs the op (55,086 pairs per head: decode)
    frame = ops_frame([(0, -1, 0)], calls=ENGINE_CALLS)
    frame["nvtx_path"] = pd.Series(["capture_32_FULL"], dtype=object)
    table = OpTable(frame)
    table.set_launches(np.array([0]), np.array([f"{STEP}/capture_32_FULL"], dtype=object),
                       np.array(["kernel_unified_attention_2d"], dtype=object))
    cost = table.cost(0)
    assert cost.flops == 4 * 64 * 55_086 * 64 + 5 * 64 * 55_086 + 32 * 64 * 64
    # replayed in two steps of other sizes: no one cost
    other = OpTable(frame)
    other.set_launches(np.array([0, 0]), np.array([f"{STEP}/capture_32_FULL", STEP.replace("55086", "60000")
                                                   + "/capture_32_FULL"], dtype=object),
                       np.array(["k", "k"], dtype=object))
    assert "step annotation" in other.cost(0).missing


def test_an_engine_op_registered_inside_gets_the_calls_and_kernels_under_it() -> None:
    # moe_forward > SortTokens (k = 4 from its [32, 4] int16 ids) and the two views of the MXFP4 weight
    # stacks; the kernel name says MXFP4: every fact the formula needs is under the op
    frame = ops_frame([(0, -1, 1), (1, 0, 2), (2, 0, 3), (3, 0, 4)], calls=ENGINE_CALLS)
    table = OpTable(frame)
    table.set_launches(np.array([0, 1]), np.array(["", ""], dtype=object),
                       np.array(["_matmul_ogs_NNT_bf16xbf16xmxfp4_16x128x256x1_swiglu",
                                 "_sum_bitmatrix_rows"], dtype=object))
    context = table.context(0)
    assert [c.name for c in context.inside] == ["SortTokens", "aten::view", "aten::view"]
    assert set(context.kernels) == {"_matmul_ogs_NNT_bf16xbf16xmxfp4_16x128x256x1_swiglu",
                                    "_sum_bitmatrix_rows"}
    # F = 5888 / 2 = 2944: 4·128·3072·2944 + 5·128·2944 + 2·128·2944·3072 + 32·32 + 2·128·3072 FLOP
    assert table.cost(0).flops == 6 * 128 * 3072 * 2944 + 5 * 128 * 2944 + 32 * 32 + 2 * 128 * 3072
    assert table.warnings() == []


def test_no_kernels_launched_leaves_the_contexts_as_the_ops_give_them() -> None:
    # a CPU trace: no kernels; the attention op on a step path keeps its own step
    frame = ops_frame([(0, -1, 0)], calls=ENGINE_CALLS)
    frame["nvtx_path"] = pd.Series([STEP], dtype=object)
    table = OpTable(frame)
    table.set_launches(np.zeros(0, dtype="int64"), np.zeros(0, dtype=object), np.zeros(0, dtype=object))
    assert table.context(0).step is not None and table.cost(0).known


def test_an_engine_op_takes_the_facts_its_peers_recorded_when_its_own_capture_lacks_them() -> None:
    # two captures of the same moe_forward call (same arguments): the first recorded the weight-stack views,
    # the second only SortTokens; the second takes F = 2944 from the first (another call, same arguments)
    frame = ops_frame([(0, -1, 1), (1, 0, 2), (2, 0, 3), (3, 0, 4), (10, -1, 1), (11, 10, 2)],
                      calls=ENGINE_CALLS)
    table = OpTable(frame)
    table.set_launches(np.array([10]), np.array([""], dtype=object),
                       np.array(["_matmul_ogs_NNT_bf16xbf16xmxfp4_16x128x256x1_swiglu"], dtype=object))
    assert table.cost(10).flops == 6 * 128 * 3072 * 2944 + 5 * 128 * 2944 + 32 * 32 + 2 * 128 * 3072
