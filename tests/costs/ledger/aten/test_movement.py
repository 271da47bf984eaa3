"""The data movement readers: cat's tensor list, and advanced indexing from the evidence of its child ops."""

from __future__ import annotations

from pathlib import Path

import pytest

from nsroof.costs.ledger.aten import op_cost

torch = pytest.importorskip("torch")


def test_cat_reads_the_tensor_list() -> None:
    # cat of [4, 4] and [4, 4] fp32: read 32·4, write 32·4 bytes, no arithmetic
    cost = op_cost("aten::cat", [[[4, 4], [4, 4]], []], ["TensorList", "Scalar"], [None, 0])
    assert (cost.flops, cost.bytes) == (0, 2 * 32 * 4)


def test_index_names_what_torch_does_not_record() -> None:
    assert "not recorded" in op_cost("aten::index", [[64, 64], []], ["float", ""]).missing
    assert "not recorded" in op_cost("aten::index_put_", [[64, 64], [], [3, 64], []],
                                     ["float", "", "float", ""], [None, None, None, False]).missing


def test_index_and_index_put_count_the_gathered_elements_and_the_index_tensors(tmp_path: Path) -> None:
    from torch.profiler import ProfilerActivity, profile
    from torch.utils.flop_counter import FlopCounterMode

    from nsroof.pipeline import analyze

    x, rows, cols, values = (torch.randn(64, 32), torch.tensor([1, 5, 7]), torch.tensor([0, 2, 3]),
                             torch.randn(3, 32))
    mask = torch.zeros(64, 32, dtype=torch.bool)
    mask[:10, :10] = True  # 100 elements

    def work() -> None:
        x[rows]
        x[rows, cols]
        x[mask]
        x[:, rows]
        x.index_put_((rows,), values, accumulate=True)
        x[rows] = values

    with FlopCounterMode(display=False) as counter:
        work()
    assert counter.get_total_flops() == 0  # FlopCounterMode counts no arithmetic in indexing, nor do we below
    with profile(activities=[ProfilerActivity.CPU], record_shapes=True) as prof:
        work()
    prof.export_chrome_trace(str(tmp_path / "index.json"))
    ops = analyze([tmp_path / "index.json"]).ops
    got = [(str(r.op), r.flops, r.bytes) for r in ops.itertuples() if "index" in str(r.op)]
    assert got == [
        # x[rows]: 3 rows × 32 = 96 fp32 read and written (768 B) + 3 int64 indices (24 B)
        ("aten::index", 0, 96 * 4 * 2 + 3 * 8),
        # x[rows, cols]: 3 elements (24 B) + two index tensors of 3 int64 (48 B)
        ("aten::index", 0, 3 * 4 * 2 + 2 * 3 * 8),
        # x[mask]: nonzero gives two int64 index tensors of the 100 set elements: 800 B + 1,600 B
        ("aten::index", 0, 100 * 4 * 2 + 2 * 100 * 8),
        # x[:, rows]: 64 × 3 = 192 elements (1,536 B) + 24 B of indices
        ("aten::index", 0, 192 * 4 * 2 + 3 * 8),
        # index_put_(accumulate=True): values read (384 B), 96 elements of x read and written (768 B), indices
        # (24 B); one add per element: 96 FLOP
        ("aten::_index_put_impl_", 96, 96 * 4 + 96 * 4 * 2 + 3 * 8),
        # x[rows] = values: values read, 96 elements written, indices: 384 + 384 + 24 = 792 B
        ("aten::_index_put_impl_", 0, 96 * 4 * 2 + 3 * 8),
    ]


def test_the_b200_index_is_costed_from_its_child_ops() -> None:
    from nsroof.pipeline import analyze
    from tests._paths import SHARED_FIXTURES

    trace = SHARED_FIXTURES / "traces" / "tracelens__b200__eager_trace.json.gz"
    if not trace.exists():
        pytest.skip("shared B200 trace absent")
    frame = analyze(trace).frame
    row = frame[frame["op"].astype(str) == "aten::index"].iloc[0]
    # one row of a bf16 [888, 2880] picked by one int64 index (as_strided to [1, 2880]): 2880·2 read + 2880·2
    # written + 8 = 11,528 B, no arithmetic
    assert (row["flops"], row["bytes"], row["missing"]) == (0, 11_528, "")
