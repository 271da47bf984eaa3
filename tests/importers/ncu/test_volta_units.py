"""A Volta export whose per-cycle peaks carry the unit `cycle/cycle`
(tests/data/ncu/volta_raw_cycle_ratio.csv, written by hand in the raw-page layout of ncu 2024.1: no real
Volta export is among the shared ones) is read and analyzed, its peaks used as the per-cycle numbers they
are; it was refused before ("unit 'cycle/cycle' of the wrong dimension")."""

from __future__ import annotations

from pathlib import Path

import pytest

from nsroof import importers
from nsroof.pipeline import analyze


def test_a_volta_export_with_cycle_ratio_peaks_is_analyzed(data_dir: Path) -> None:
    path = data_dir / "ncu" / "volta_raw_cycle_ratio.csv"
    _, facts = importers.read(path)
    peak = "sm__sass_thread_inst_executed_op_ffma_pred_on.sum.peak_sustained"
    assert facts.metric_units[peak] == "cycle/cycle"
    rows = analyze([path]).frame.set_index("level")
    # FP32 roof from the export: 2 × 5,120 FFMA/cycle (80 SMs × 64) × 1.53 GHz = 1.56672e13 FLOP/s
    assert rows.loc["dram", "peak_flop_per_s"] == pytest.approx(2 * 5120 * 1.53e9)
    # CC 7.0's L1 counter: 98,304 LSU-writeback cycles × 128 B = 12,582,912 B, against 128 B × 80 per cycle
    # × 1.53 GHz = 1.56672e13 B/s
    assert rows.loc["l1", "bytes"] == 98_304 * 128
    assert rows.loc["l1", "bandwidth_bytes_per_s"] == pytest.approx(128 * 80 * 1.53e9)
    assert rows.loc["l1", "bound"] == "memory"
