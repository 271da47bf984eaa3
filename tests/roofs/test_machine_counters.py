"""One datasheet roof per counter: a level's figure is the roof of the counter it names (`counters`), the
level's other counter has its own figure (`counter_bytes_per_cycle`) or none, never the first one's."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from nsroof.errors import NsroofError
from nsroof.roofs import machines
from nsroof.roofs.machines import Machine


def test_a100_l2_tag_stage_serves_1_5x_what_lts2xbar_returns() -> None:
    a = machines.resolve("a100-40gb")
    assert a is not None and a.counters == {"l2": "lts2xbar", "l1": "lsu"}
    # 80 slices × 2 × 32 B (lts__lts2xbar_cycles_active peak 2 per slice) = 5120 B/cycle × 1.41 GHz
    assert a.level_bandwidth("l2", "lts2xbar") == (5120 * 1.41e9, "bandwidth_bytes_per_s.l2", "")
    # 80 slices × 3 × 32 B (lts__t_sectors.avg.peak_sustained 3 in the real A100 reports) = 7680 B/cycle
    assert a.level_bandwidth("l2", "lts__t") == (7680 * 1.41e9, "counter_bandwidth_bytes_per_s.l2.lts__t", "")
    # at the clocks an export recorded, both follow the L2 clock: 7680 × 1,063.28 MHz = 8.166e12 B/s (ncu's
    # own 32 × lts__t_sectors.avg.peak_sustained 3 × 80 slices × lts__cycles_elapsed.avg.per_second)
    at = a.at_clocks(sm_hz=1090.84e6, dram_hz=1214.9e6, l2_hz=1063.28e6)
    assert at.level_bandwidth("l2", "lts__t")[0] == pytest.approx(7680 * 1063.28e6)
    assert at.level_bandwidth("l2", "lts2xbar")[0] == pytest.approx(5120 * 1063.28e6)
    # without an L2 clock the SM clock stands in for both, as for the plain figure
    assert a.at_clocks(sm_hz=765e6).level_bandwidth("l2", "lts__t")[0] == pytest.approx(7680 * 765e6)


def test_no_figure_for_a_counter_is_nan_with_the_missing_fact() -> None:
    t4 = machines.resolve("t4")
    assert t4 is not None and t4.counters == {"l2": "lts__t", "l1": "lsu"}
    value, key, why = t4.level_bandwidth("l2", "lts2xbar")
    assert math.isnan(value) and key == ""
    assert why == "spec:T4 has no L2 roof for the lts2xbar counter (its L2 figure is the lts__t counter's)"
    assert math.isnan(t4.level_bandwidth("l1", "l1tex__t")[0])
    # the LSU writeback's 128 B per SM per cycle serves lsu, lsu_lg and lsu_lgds bytes: 40 × 128 × 1.59e9
    assert t4.level_bandwidth("l1", "lsu")[0] == 40 * 128 * 1.59e9
    # bytes of no counter (an analytic cost) and DRAM take the plain figure
    assert t4.level_bandwidth("l2", "")[0] == t4.bandwidth_bytes_per_s["l2"]
    assert t4.level_bandwidth("dram", "dram")[0] == 320e9


def test_a_profile_that_names_no_counter_is_a_what_if_for_any_counter() -> None:
    measured = Machine(name="box", source="measured", simt_flop_per_s={"fp32": 1e13},
                       bandwidth_bytes_per_s={"dram": 1e12, "l2": 5e12})
    assert measured.level_bandwidth("l2", "lts2xbar")[0] == 5e12
    assert measured.level_bandwidth("l2", "lts__t")[0] == 5e12


def test_counter_tables_round_trip_and_are_checked(tmp_path: Path) -> None:
    path = tmp_path / "m.json"
    good = {"name": "m", "simt_flop_per_s": {"fp32": 1e13}, "sm_count": 10, "clocks_hz": {"boost": 1e9},
            "bandwidth_bytes_per_s": {"dram": 1e12}, "bytes_per_cycle": {"l2": 640, "l1": 128},
            "counters": {"l2": "lts2xbar", "l1": "lsu"},
            "counter_bytes_per_cycle": {"l2.lts__t": 960, "l1.l1tex__t": 64}}
    path.write_text(json.dumps(good))
    m = machines.load(path)
    # 960 B × 1 GHz; the L1 figure is per SM: 64 B × 10 SMs × 1 GHz
    assert m.counter_bandwidth_bytes_per_s == {"l2.lts__t": 960e9, "l1.l1tex__t": 640e9}
    assert m.level_bandwidth("l1", "l1tex__t")[0] == 640e9
    m.save(path)
    assert machines.load(path).counter_bandwidth_bytes_per_s == m.counter_bandwidth_bytes_per_s
    for bad, needle in (({"counters": {"l2": "lts_t"}}, "'counters' gives 'l2': 'lts_t'"),
                        ({"counter_bytes_per_cycle": {"l2.lts2xbar": 1}}, "repeats the plain l2 figure"),
                        ({"counter_bytes_per_cycle": {"l3.x": 1}}, "unknown key 'l3.x'")):
        path.write_text(json.dumps({**good, **bad}))
        with pytest.raises(NsroofError, match=needle.replace("(", r"\(")):
            machines.load(path)
