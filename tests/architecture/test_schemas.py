"""Every table nsroof passes between layers is the one declared in nsroof.schema, column for column."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pyarrow as pa

from nsroof import importers
from nsroof.counters.quantities import derive
from nsroof.schema import IDENTITY_COLUMNS, QUANTITY_FIELDS

_PANDAS_KIND = {pa.float64(): "f", pa.string(): "O", pa.bool_(): "b", pa.int64(): "i"}


def test_importers_return_the_declared_identity_columns(example_csv: Path) -> None:
    kernels, _ = importers.read(example_csv)
    assert list(kernels.columns[: len(IDENTITY_COLUMNS)]) == list(IDENTITY_COLUMNS)


def test_derive_returns_the_declared_quantities_in_order_with_their_types(example_csv: Path) -> None:
    kernels, _ = importers.read(example_csv)
    quantities = derive(kernels)
    assert list(quantities.columns) == [f.name for f in QUANTITY_FIELDS]
    kinds = {f.name: _PANDAS_KIND[f.type] for f in QUANTITY_FIELDS}
    assert {c: quantities[c].dtype.kind for c in quantities.columns} == kinds


def test_derive_of_no_kernels_still_has_every_declared_column() -> None:
    quantities = derive(pd.DataFrame({"cc": pd.Series([], dtype=object)}))
    assert list(quantities.columns) == [f.name for f in QUANTITY_FIELDS]


# --------------------------------------------------------------------------- the trace importer's contract
# The importer ends at "which op launched this kernel": the kernel table's op_id names a row of the ops table
# (FileFacts.ops, nsroof.schema.OP_COLUMNS); costing is nsroof.costs.attribution's.

_DTYPE_KIND = {"object": "O", "Int64": "i", "float64": "f", "int64": "i"}


def _trace(tmp_path: Path) -> Path:
    def x(cat: str, name: str, ts: float, dur: float, pid: int = 1, tid: int = 1,
          **args: object) -> dict[str, object]:
        return {"ph": "X", "cat": cat, "name": name, "pid": pid, "tid": tid, "ts": ts, "dur": dur,
                "args": args}

    events = [
        x("cpu_op", "aten::linear", 101.0, 20.0, **{"External id": 10,
                                                   "Input Dims": [[8, 16], [32, 16], [32]],
                                                   "Input type": ["float", "float", "float"]}),
        x("cpu_op", "aten::addmm", 102.0, 10.0, **{"External id": 11,
                                                  "Input Dims": [[32], [8, 16], [16, 32], [], []],
                                                  "Input type": ["float", "float", "float", "Scalar",
                                                                 "Scalar"],
                                                  "Concrete Inputs": ["", "", "", "1", "1"]}),
        x("cuda_runtime", "cudaLaunchKernel", 103.0, 2.0, correlation=100, **{"External id": 11}),
        x("kernel", "ampere_sgemm_32x32_sliced1x4_tn", 130.0, 12.5, pid=0, tid=7, correlation=100,
          **{"External id": 11}),
    ]
    path = tmp_path / "t.json"
    path.write_text(__import__("json").dumps({"traceEvents": events}))
    return path


def test_a_trace_gives_kernels_naming_their_innermost_op_and_the_declared_ops_table(tmp_path: Path) -> None:
    from nsroof.schema import OP_COLUMNS, TRACE_KERNEL_COLUMNS

    kernels, facts = importers.read(_trace(tmp_path))
    ops = facts.ops
    assert list(ops.columns) == list(OP_COLUMNS)
    assert ({c: ops[c].dtype.kind for c in ops.columns}
            == {c: _DTYPE_KIND[d] for c, (d, _, _) in OP_COLUMNS.items()})
    assert str(kernels["op_id"].dtype) == TRACE_KERNEL_COLUMNS["op_id"][0]
    # the kernel's launch names External id 11: aten::addmm (op 1), whose parent is aten::linear (op 0)
    op = ops.set_index("op_id").loc[int(kernels["op_id"].iloc[0])]
    assert (op["name"], op["parent_op_id"]) == ("aten::addmm", 0)
    assert op["concrete_inputs"] == [None, None, None, 1, 1]
    assert (op["start_us"], op["duration_us"], op["thread"]) == (102.0, 10.0, "1/1")


def test_the_trace_kernel_table_holds_only_declared_columns(tmp_path: Path) -> None:
    """Every column the trace importer hands the models layer is declared (identity, TRACE_KERNEL_COLUMNS with
    their dtypes, or a profiler metric under its ncu name): an undeclared one fails here."""
    from nsroof.importers.kernel_table import is_metric_column
    from nsroof.schema import TRACE_KERNEL_COLUMNS

    kernels, _ = importers.read(_trace(tmp_path))
    undeclared = [c for c in kernels.columns if c not in IDENTITY_COLUMNS and c not in TRACE_KERNEL_COLUMNS
                  and not is_metric_column(c)]
    assert undeclared == []
    for c in set(kernels.columns) & set(TRACE_KERNEL_COLUMNS):
        assert kernels[c].dtype.kind == _DTYPE_KIND[TRACE_KERNEL_COLUMNS[c][0]], c


def test_the_analytic_tables_and_the_filled_quantities_are_the_declared_ones(tmp_path: Path) -> None:
    from nsroof.costs.attribution import attribute
    from nsroof.costs.costing import costed
    from nsroof.schema import ANALYTIC_COLUMNS, ANALYTIC_QUANTITY_FIELDS, OP_LEVEL_KERNEL_COLUMNS

    kernels, facts = importers.read(_trace(tmp_path))
    a = attribute(kernels, facts.ops)
    for table in (a.analytic, a.op_analytic):
        assert list(table.columns) == list(ANALYTIC_COLUMNS)
        assert ({c: table[c].dtype.kind for c in table}
                == {c: _DTYPE_KIND[d] for c, (d, _, _) in ANALYTIC_COLUMNS.items()})
    assert list(a.op_kernels.columns) == list(OP_LEVEL_KERNEL_COLUMNS)
    c = costed(kernels, facts.ops)
    declared = [f.name for f in (*QUANTITY_FIELDS, *ANALYTIC_QUANTITY_FIELDS)]
    assert list(c.quantities.columns) == declared and list(c.op_quantities.columns) == declared


def test_the_op_level_report_has_the_report_columns(tmp_path: Path) -> None:
    from nsroof.pipeline import analyze
    from nsroof.schema import COLUMNS

    report = analyze(_trace(tmp_path))
    assert list(report.ops.columns) == COLUMNS
    assert list(report.ops["kind"]) == ["op"] and list(report.ops["level"]) == ["dram"]
