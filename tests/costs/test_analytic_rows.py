"""nsroof.costs.analytic_rows: the text columns read without pandas' string round trip hold what the round
trip gives, and the analytic table reads each distinct cost once."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from nsroof.costs.analytic_rows import Row, Rows, analytic_table, as_str, texts
from nsroof.costs.ledger.aten import op_cost, unknown

COLUMNS = {
    "object str": pd.Series(["a", "b", ""], dtype=object),
    "object missing": pd.Series(["a", None, np.nan], dtype=object),
    "object mixed": pd.Series(["a", 1, 2.5], dtype=object),
    "str": pd.Series(["a", None, "c"], dtype="str"),
    "string": pd.Series(["a", None, "c"], dtype="string"),
    "Int64": pd.Series([1, None, 3], dtype="Int64"),
}


@pytest.mark.parametrize("kind", COLUMNS)
def test_texts_and_as_str_are_the_round_trip_through_str(kind: str) -> None:
    column = COLUMNS[kind]
    frame = pd.DataFrame({"c": column})
    slow = column.astype(object).where(column.notna(), "").astype(str).to_numpy(dtype=object)
    assert texts(frame, "c").tolist() == slow.tolist()
    assert texts(frame, "c", "kernel").tolist() == [v or "kernel" for v in slow.tolist()]
    got, want = as_str(column), column.astype(str).to_numpy()
    assert [type(v) for v in got] == [type(v) for v in want]
    assert (pd.isna(got).tolist() == pd.isna(want).tolist()
            and got[~pd.isna(got)].tolist() == want[~pd.isna(want)].tolist())


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
