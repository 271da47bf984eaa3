"""The summary's lower-bound warning (nsroof.report.summary.lower_bound_warnings): L2 bytes from a read-only
counter (lts2xbar: L2 -> crossbar) that saw fewer bytes than DRAM, in an export without a write-inclusive L2
counter, are a known value (so `missing` stays empty) but only a lower bound, and the summary says so."""

from __future__ import annotations

import csv
from pathlib import Path

from nsroof.pipeline import analyze
from nsroof.report.summary import lower_bound_warnings, render
from tests._paths import DATA


def _read_only_l2(tmp_path: Path, cycles: tuple[str, str]) -> Path:
    """tiny_raw.csv with its L2 counter lts__t_bytes.sum (write-inclusive) replaced by the read-only
    lts__lts2xbar_cycles_active.sum (32 B a cycle), one value per launch."""
    lines = (DATA / "spine" / "tiny_raw.csv").read_text().splitlines()
    rows = [next(csv.reader([ln])) for ln in lines[2:]]
    at = rows[0].index("lts__t_bytes.sum")
    rows[0][at], rows[1][at] = "lts__lts2xbar_cycles_active.sum", "cycle"
    rows[2][at], rows[3][at] = cycles
    body = [",".join(f'"{c}"' for c in row) for row in rows]
    path = tmp_path / "read_only_l2.csv"
    path.write_text("\n".join(lines[:2] + body) + "\n")
    return path


def test_a_read_only_l2_count_below_dram_is_a_lower_bound_warned_once(tmp_path: Path) -> None:
    # launch 0: 100 cycles x 32 B = 3,200 B < DRAM 12,582,912 B (a lower bound);
    # launch 1: 20,000,000 x 32 B = 640,000,000 B >= DRAM 12,582,912 B (kept, no note)
    report = analyze(_read_only_l2(tmp_path, ("100", "20000000")))
    l2 = report.frame[report.frame["level"].astype(str) == "l2"].set_index("kernel_id")
    assert l2.loc[0, "bytes"] == 3200.0 and "lower bound" in l2.loc[0, "bytes_source"]
    # the value is known: the warning, not `missing`, says it is a bound (missing names only the tensor
    # counters tiny_raw.csv lacks)
    assert "lts" not in l2.loc[0, "missing"] and "bytes" not in l2.loc[0, "missing"]
    assert "lower bound" not in l2.loc[1, "bytes_source"]
    warnings = lower_bound_warnings(report.frame)
    assert len(warnings) == 1
    assert warnings[0].startswith("1 row(s) count bytes with a read-only counter that saw fewer bytes than "
                                  "DRAM")
    assert "L2 32 × lts__lts2xbar_cycles_active.sum: 1 row(s), collect lts__t_bytes.sum" in warnings[0]
    assert sum(line.startswith("warning: 1 row(s) count bytes")
               for line in render(report, width=400).splitlines()) == 1


def test_no_warning_when_every_read_only_count_reaches_dram(tmp_path: Path) -> None:
    report = analyze(_read_only_l2(tmp_path, ("1000000", "20000000")))  # 32,000,000 B >= 12,582,912 B
    assert lower_bound_warnings(report.frame) == []
    assert "read-only counter" not in render(report)
