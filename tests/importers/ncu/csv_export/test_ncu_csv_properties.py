"""Property tests: any details export written the way ncu writes it — any number style, any unit chosen
per row — reads back to the same SI values."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from nsroof.importers.ncu import csv_export
from tests._locale_text import localized

HEADER = ["ID", "Process ID", "Process Name", "Host Name", "Kernel Name", "Context", "Stream", "Block Size",
          "Grid Size", "Device", "CC", "Section Name", "Metric Name", "Metric Unit", "Metric Value",
          "Rule Name", "Rule Type", "Rule Description"]
# (metric, [(unit, factor to SI)]) — every unit ncu may choose for that metric's dimension
METRICS = {
    "dram__bytes_read.sum": [("byte", 1.0), ("Kbyte", 1e3), ("Mbyte", 1e6), ("Gbyte", 1e9)],
    "gpu__time_duration.sum": [("nsecond", 1e-9), ("usecond", 1e-6), ("msecond", 1e-3), ("ns", 1e-9),
                               ("us", 1e-6)],
    "dram__bytes.sum.per_second": [("byte/second", 1.0), ("Mbyte/second", 1e6), ("Gbyte/second", 1e9),
                                   ("Gbyte/s", 1e9)],
    "sm__cycles_elapsed.avg.per_second": [("cycle/second", 1.0), ("cycle/usecond", 1e6),
                                          ("cycle/nsecond", 1e9), ("Ghz", 1e9)],
    "sm__sass_thread_inst_executed_op_ffma_pred_on.sum": [("inst", 1.0)],
}


def fmt(cents: int, style: str) -> str:
    return localized(cents / 100, style, 2)


def q(value: str) -> str:
    return '"' + value.replace('"', '""') + '"'


kernel = st.tuples(
    st.lists(st.tuples(st.integers(0, 3), st.integers(0, 10**12)), min_size=len(METRICS),
             max_size=len(METRICS)),
    st.booleans(),  # with a rule row
)


@settings(max_examples=25, deadline=None)
@given(style=st.sampled_from(["C", "en_US", "de_DE"]), kernels=st.lists(kernel, min_size=1, max_size=6))
def test_values_round_trip(style: str, kernels: list[tuple[list[tuple[int, int]], bool]]) -> None:
    lines = [",".join(q(h) for h in HEADER)]
    expected: list[dict[str, float]] = []
    for kid, (choices, rule) in enumerate(kernels):
        ident = [str(kid), "7", "app", "h", f"void k{kid}<float>(float *, int)", "1", "7", "(32, 1, 1)",
                 "(8, 1, 1)", "0", "8.0"]
        want = {}
        for (metric, units), (pick, cents) in zip(METRICS.items(), choices, strict=True):
            unit, factor = units[pick % len(units)]
            lines.append(",".join(q(v) for v in ident + ["Command line profiler metrics", metric, unit,
                                                         fmt(cents, style)]) + ",")
            want[metric] = cents / 100 * factor
        if rule:
            lines.append(",".join(q(v) for v in ident + ["SpeedOfLight", "", "", "", "SOLBottleneck", "OPT",
                                                         "a, \"quoted\" text"]))
        expected.append(want)
    # evidence of the style, as every real export carries: a 2-decimal value with grouping
    anchor = [str(len(kernels)), "7", "app", "h", "anchor()", "1", "7", "(1, 1, 1)", "(1, 1, 1)", "0", "8.0"]
    lines.append(",".join(q(v) for v in anchor + ["Command line profiler metrics", "x__anchor.sum", "",
                                                  fmt(144340567669, style)]) + ",")
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "prop.csv"
        path.write_text("\n".join(lines) + "\n", encoding="utf-8")
        df, facts = csv_export.read(path)
        df = df.set_index("kernel_id")
    assert facts.number_style == style
    for kid, want in enumerate(expected):
        for metric, value in want.items():
            assert df.at[kid, metric] == pytest.approx(value, rel=1e-12, abs=1e-18), (metric, kid)
