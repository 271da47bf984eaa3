"""The model families of issue #25 under nsroof.profile on CPU: at least 95% of their op time costed and no op
with 1% or more uncosted. Pure views and allocations (they move no data) and the autograd engine's and
optimizer's own bookkeeping (rows that are no operator: `autograd::engine::evaluate_function: …`,
`…Backward0` nodes, AccumulateGrad) and a composite op's own dispatch time (its work is on the ops it calls)
are set aside, by the reason nsroof.costs.ledger.aten gives them."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from nsroof.collectors.torch_profile import profile  # noqa: E402
from nsroof.costs.ledger.aten import BOOKKEEPING_REASON, COMPOSITE_REASON, VIEW_REASON  # noqa: E402
from nsroof.roofs.machines import Machine  # noqa: E402
from tests.costs.model_families import FAMILIES  # noqa: E402

pytestmark = pytest.mark.usefixtures("one_thread")

MACHINE = Machine(name="test-cpu", source="file", peak_flop_per_s={"fp32": 1e11, "fp64": 5e10},
                  simt_flop_per_s={"fp32": 1e11, "fp64": 5e10}, bandwidth_bytes_per_s={"dram": 1e10})
SET_ASIDE = (VIEW_REASON, BOOKKEEPING_REASON, COMPOSITE_REASON)


def _op_time(report):  # type: ignore[no-untyped-def]
    """The rows of operators that do work: neither views/allocations nor autograd bookkeeping (by the reason
    the ledger gives them), nor profiler rows that are no op at all (no namespace)."""
    op = report["op"].astype(str)
    return report[op.str.contains("::") & ~report["missing"].astype(str).isin(SET_ASIDE)]


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_family_op_time_is_costed(family: str) -> None:
    step = FAMILIES[family]()
    step()  # warm up: first calls allocate and pick kernels
    with profile(machine=MACHINE, modules=False) as prof:
        step()
    rows = _op_time(prof.report)
    d = rows["duration_s"].astype("float64").fillna(0.0)
    total = d.sum()
    costed = d[rows["flops"].notna()].sum() / total
    uncosted = d[rows["flops"].isna()].groupby(rows["op"].astype(str)).sum() / total
    assert costed >= 0.95, (family, costed, uncosted.sort_values().tail(5).to_dict())
    assert (uncosted < 0.01).all(), (family, uncosted[uncosted >= 0.01].to_dict())
