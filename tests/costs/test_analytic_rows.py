"""nsroof.costs.analytic_rows: the analytic table reads each distinct cost once (its text columns are read by
nsroof.frames.columns: tests/frames/test_columns.py)."""

from __future__ import annotations

import pandas as pd

from nsroof.costs.analytic_rows import Row, Rows, analytic_table
from nsroof.costs.ledger.aten import op_cost, unknown


def test_the_analytic_table_of_rows_sharing_costs_is_that_of_each_row() -> None:
    add = op_cost("aten::add", [[4, 8], [4, 8], []], ["float", "float", "Scalar"])
    rows = [Row(3, "own", add), Row(4, "work", add, 0.5, "1 of 2 kernels"), Row(cost=unknown("why")),
            Row(3, "own", add), Row(-1, "", add, 1.0, "", "trace")]
    kernels = pd.DataFrame({"source": ["s"] * 5, "kernel_id": pd.array(range(5), dtype="Int64")})
    table = analytic_table(kernels, Rows.of(rows))
    assert table["analytic_op_id"].tolist() == [3, 4, pd.NA, 3, pd.NA]
    # add: 4·8 = 32 FLOP, each kernel its share
    assert table["analytic_flops"].tolist()[:2] == [add.flops, add.flops * 0.5] == [32.0, 16.0]
    assert table["analytic_label"].tolist() == [add.label, f"{add.label} ×0.5 (1 of 2 kernels)", "",
                                                add.label, add.label]
    assert table["analytic_origin"].tolist() == ["analytic", "analytic", "", "analytic", "trace"]
    assert table["analytic_missing"].tolist() == ["", "", "why", "", ""]
