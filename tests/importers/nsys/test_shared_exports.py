"""The public Nsight Systems exports in ../shared/fixtures/nsys (MANIFEST.md there gives each one's source and
schema): every one analyzes with one kernel row per CUPTI_ACTIVITY_KIND_KERNEL row and the same summed time,
its GPU resolved in the machine table, and the kernels launched inside an NVTX range carry that range (or, for
an emit_nvtx op range, its op). The expectations are computed here from the database with plain SQL."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pandas as pd
import pytest

from nsroof.importers.nsys.rep import find_nsys
from nsroof.roofs import machines
from tests._paths import SHARED_FIXTURES
from tests._shared_inputs import imported

NSYS = SHARED_FIXTURES / "nsys"
EXPORTS = sorted(NSYS.glob("*.sqlite")) if NSYS.is_dir() else []
pytestmark = pytest.mark.skipif(not EXPORTS, reason=f"no shared nsys exports in {NSYS}")


def _sql(path: Path, query: str) -> pd.DataFrame:
    with sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True) as db:
        return pd.read_sql_query(query, db)


def _innermost_ranges(path: Path) -> pd.DataFrame:
    """Per kernel (by correlationId): the text of the innermost NVTX range enclosing its launch call on the
    launching thread, '' when none."""
    return _sql(path, """
        SELECT k.correlationId AS corr, COALESCE((
            SELECT COALESCE(n.text, (SELECT value FROM StringIds WHERE id = n.textId)) FROM NVTX_EVENTS n
            WHERE n.eventType IN (59, 60) AND n.globalTid = r.globalTid AND n.start <= r.start
              AND n.end >= r.end
            ORDER BY n.start DESC, n.end ASC LIMIT 1), '') AS innermost
        FROM CUPTI_ACTIVITY_KIND_KERNEL k JOIN CUPTI_ACTIVITY_KIND_RUNTIME r USING (correlationId)""")


@pytest.mark.parametrize("path", EXPORTS, ids=[p.name for p in EXPORTS])
def test_every_kernel_is_a_row_with_its_time(path: Path) -> None:
    frame, facts = imported(path)
    table = _sql(path, "SELECT COUNT(*) AS n, SUM(end - start) AS ns FROM CUPTI_ACTIVITY_KIND_KERNEL")
    kernels = frame[frame["kind"] == "kernel"]
    assert len(kernels) == int(table["n"].iloc[0])
    seconds = float(table["ns"].iloc[0]) * 1e-9
    assert kernels["gpu__time_duration.sum"].sum() == pytest.approx(seconds, rel=1e-12)
    assert facts.format == "nsys"


@pytest.mark.parametrize("path", EXPORTS, ids=[p.name for p in EXPORTS])
def test_the_gpu_resolves_in_the_machine_table(path: Path) -> None:
    frame, _ = imported(path)
    devices = set(frame["device"])
    assert len(devices) == 1
    assert machines.lookup_device(devices.pop()) is not None


@pytest.mark.parametrize("path", EXPORTS, ids=[p.name for p in EXPORTS])
def test_kernels_launched_in_an_nvtx_range_carry_it(path: Path) -> None:
    frame, _ = imported(path)
    expected = _innermost_ranges(path)
    kernels = frame[frame["kind"] == "kernel"]
    inside = expected[expected["innermost"] != ""]
    if not len(inside):
        pytest.skip("no kernel launched inside an NVTX range")
    # the kernel table keeps no correlation id: its kernel rows are in (start, correlation) order
    got = _sql(path, "SELECT correlationId AS corr FROM CUPTI_ACTIVITY_KIND_KERNEL "
                     "ORDER BY start, correlationId")
    by_corr = dict(zip(got["corr"], zip(kernels["nvtx_ranges"], kernels["op"], strict=True), strict=True))
    carried = sum(1 for corr, text in zip(inside["corr"], inside["innermost"], strict=True)
                  if (text in list(by_corr[corr][0])) or text.split(",")[0] == by_corr[corr][1])
    assert carried / len(inside) >= 0.95


def test_an_nsys_rep_is_exported_through_nsys(tmp_path: Path) -> None:
    rep = NSYS / "mohanadodema__nsys_profile.nsys-rep"
    if find_nsys() is None or not rep.is_file():
        pytest.skip("no nsys CLI (../shared/tools/get-nsys.sh, then NSROOF_NSYS=…) or no .nsys-rep")
    frame, facts = imported(rep)
    sqlite_frame, _ = imported(NSYS / "mohanadodema__nsys_profile.sqlite")
    assert len(frame) == len(sqlite_frame) and facts.format == "nsys"
