"""An eager run against a compiled one (nsroof.report.compare_compiled): rows paired by module and kind of
op, uncosted rows left out and counted, never added as 0 bytes."""

from __future__ import annotations

import math

import pandas as pd

from nsroof.report.compare import compare, render
from nsroof.report.compare_compiled import is_compiled, keyed, matched_rows
from tests.report.report_frames import kernel, make_report


def cpu_report(rows: list[tuple[str, str, str, float, float]]) -> pd.DataFrame:
    """(op, module, formula ('' uncosted), seconds, bytes = FLOPs) per op row of a CPU profile."""
    report = make_report([kernel(i, op, seconds, moved if formula else math.nan,
                                 {lv: moved if formula else math.nan for lv in ("dram", "l2", "l1")})
                          for i, (op, _, formula, seconds, moved) in enumerate(rows)])
    by_id = {i: r for i, r in enumerate(rows)}
    report["module"] = [by_id[i][1] for i in report["kernel_id"]]
    report["bytes_source"] = [f"analytic:{by_id[i][2]}" if by_id[i][2] else "" for i in report["kernel_id"]]
    return report


EAGER = cpu_report([
    ("aten::linear", "Net.block.fc1", "linear", 3e-3, 100.0),
    ("aten::relu", "Net.block.act", "pointwise", 1e-3, 40.0),
    ("aten::add", "Net.block", "pointwise", 1e-3, 30.0),
    ("aten::view", "Net.block.fc1", "", 1e-4, 0.0),
])
COMPILED = cpu_report([
    ("aten::addmm", "Net.block.fc1", "gemm-bias", 2e-3, 100.0),
    # one kernel fusing the relu (Net.block.act) with the residual add (Net.block): module Net.block
    ("graph_0_cpp_fused_add_relu_0", "Net.block", "inductor-fused", 5e-4, 50.0),
    ("CompiledFunction", "Net", "", 2e-4, 0.0),
])


def test_rows_pair_up_by_module_and_kind() -> None:
    assert is_compiled(COMPILED) and not is_compiled(EAGER)
    k = keyed(EAGER, COMPILED)
    # the linear and the addmm are both matmul work of Net.block.fc1; the relu and the add roll up to the
    # fused kernel's module, Net.block
    dram = k.before[k.before["level"] == "dram"]
    assert list(zip(dram["function"], dram["nvtx_path"], strict=True)) == [
        ("matmul", "Net.block.fc1"), ("fused / elementwise", "Net.block"),
        ("fused / elementwise", "Net.block")]
    assert k.uncosted == (1, 1) and k.rows == (3, 2)
    assert matched_rows(k) == (1.0, 1.0)


def test_the_comparison_says_how_it_paired_and_what_it_left_out() -> None:
    c = compare(EAGER, COMPILED)
    assert c.by == "module" and c.per == "run"
    fused = c.kernels[c.kernels["function"] == "fused / elementwise"].iloc[0]
    # relu + add (1 ms + 1 ms, 40 + 30 B) against the fused kernel (0.5 ms, 50 B)
    assert (fused["duration_s_before"], fused["duration_s_after"]) == (2e-3, 5e-4)
    assert (fused["bytes_dram_before"], fused["bytes_dram_after"]) == (70.0, 50.0)
    text = render(c)
    assert "matched by module + kind of op" in text and "costed rows matched: 100% of before's" in text
    assert "left out: 1 before, 1 after" in text


def test_a_bytes_total_never_counts_an_uncosted_row_as_zero() -> None:
    # two runs keyed by function (neither compiled): the uncosted rows' time is named beside the total
    plain = COMPILED[COMPILED["function"] != "graph_0_cpp_fused_add_relu_0"]
    text = render(compare(EAGER, plain))
    assert ("DRAM bytes: 170 B -> 100 B (before: 1 rows without bytes (100.000 us) not counted; after: 1 "
            "rows without bytes (200.000 us) not counted)") in text
