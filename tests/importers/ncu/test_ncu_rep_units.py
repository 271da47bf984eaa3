"""`.ncu-rep` = its raw page, unit by unit: for every shared report and every metric with a dimension
nsroof checks or a formula reads, the unit ncu_report gives (normalized by ncu_rep.csv_unit) scales like
the raw page's units row (`LC_ALL=C ncu -i NAME.ncu-rep --csv --page raw --print-units base`, ncu 2024.1.1)
and passes or fails the dimension check alike. Skipped without the shared fixtures or ncu-report."""

from __future__ import annotations

import csv

import pytest

from nsroof import units
from nsroof.counters import dimensions
from nsroof.importers.ncu import rep as ncu_rep
from tests._paths import SHARED_FIXTURES

NAMES = sorted(p.name[: -len(".ncu-rep")] for p in (SHARED_FIXTURES / "rep").glob("*.ncu-rep")
               if (SHARED_FIXTURES / "converted" / f"{p.name[:-8]}.raw_base.csv").is_file()) or ["<none>"]


def _scaled(unit: str) -> tuple[float, str] | None:
    try:
        s = units.scale(unit)
    except units.UnknownUnitError:
        return None
    return s.factor, s.base


def test_per_cycle_and_per_second_spellings() -> None:
    # the spellings ncu_report gives where the raw page prints another (issue 19, panjd123__384)
    assert ncu_rep.csv_unit("l1tex__data_pipe_lsu_wavefronts.avg.peak_sustained_elapsed.per_second",
                            "1/s") == "/second"
    assert ncu_rep.csv_unit("sm__sass_thread_inst_executed_op_ffma_pred_on.sum.peak_sustained",
                            "inst") == "inst/cycle"
    assert ncu_rep.csv_unit("derived__sm__sass_thread_inst_executed_op_ffma_pred_on_x2", "inst") == "thread"
    # a peak given the bare `cycle` becomes `cycle/cycle`: a ratio per cycle, which the dimension check reads
    peak = "sm__sass_thread_inst_executed_op_ffma_pred_on.sum.peak_sustained"
    assert ncu_rep.csv_unit(peak, "cycle") == "cycle/cycle" and dimensions.check(peak, "cycle/cycle") is None
    assert ncu_rep.csv_unit("dram__bytes.sum.per_second", "byte/s") == "byte/s"  # a respelling units reads
    assert ncu_rep.csv_unit("dram__bytes.sum", "byte") == "byte"


@pytest.mark.parametrize("name", NAMES)
def test_report_units_scale_like_the_raw_page(name: str) -> None:
    if name == "<none>":
        pytest.skip("shared reports not present")
    module = ncu_rep._load_ncu_report_module()
    if module is None:
        pytest.skip("the ncu-report package is not installed")
    with open(SHARED_FIXTURES / "converted" / f"{name}.raw_base.csv", encoding="utf-8-sig", newline="") as f:
        rows = list(csv.reader(f))
    at = next(i for i, r in enumerate(rows) if r and r[0] == "ID")
    csv_units = dict(zip(rows[at], rows[at + 1], strict=False))
    context = module.load_report(str(SHARED_FIXTURES / "rep" / f"{name}.ncu-rep"))
    checked = 0
    for r in range(context.num_ranges()):
        rng = context.range_by_idx(r)
        for a in range(rng.num_actions()):
            action = rng.action_by_idx(a)
            for metric in map(str, action.metric_names()):
                m = action.metric_by_name(metric)
                if m is None or metric not in csv_units:
                    continue
                if dimensions.expected_units(metric) is None and not dimensions.is_read(metric):
                    continue
                rep, conv = _scaled(ncu_rep.csv_unit(metric, str(m.unit()))), _scaled(csv_units[metric])
                assert (rep is None) == (conv is None), (metric, str(m.unit()), csv_units[metric])
                if rep is None or conv is None:
                    continue
                assert rep[0] == conv[0], (metric, str(m.unit()), csv_units[metric])
                assert ((dimensions.check(metric, rep[1]) is None)
                        == (dimensions.check(metric, conv[1]) is None)), metric
                checked += 1
    assert checked > 0
