"""Roof per counter: a read-only L2/L1 byte counter below DRAM bytes (a write-heavy kernel measured with
lts2xbar or the LSU writeback) gives way to the level's write-inclusive counter when the export has it,
and the bandwidth follows the counter; otherwise the provenance calls the value a lower bound."""

from __future__ import annotations

import pandas as pd

from nsroof.counters.quantities import derive


def _kernel(**metrics: float) -> pd.DataFrame:
    return pd.DataFrame([{"kernel_id": 0, "cc": "8.0", "gpu__time_duration.sum": 1e-5, **metrics}])


def test_write_heavy_kernel_takes_the_write_inclusive_l2_counter() -> None:
    # DRAM 1000 B; lts2xbar 10 cycles x 32 B = 320 B (reads only) < 1000; lts__t 40 sectors x 32 B = 1280 B
    q = derive(_kernel(**{"dram__bytes.sum": 1000.0, "lts__lts2xbar_cycles_active.sum": 10.0,
                          "lts__t_sectors.sum": 40.0, "lts__t_sectors.sum.peak_sustained": 96.0,
                          "lts__cycles_elapsed.avg.per_second": 1.5e9,
                          "lts__lts2xbar_cycles_active.sum.peak_sustained": 80.0}))
    assert q["bytes_l2"].iat[0] == 1280.0
    assert q["bytes_source_l2"].iat[0].startswith("32 × lts__t_sectors.sum (write-inclusive:")
    # the roof of the same counter: 32 B x 96 sectors/cycle x 1.5 GHz = 4.608e12 B/s (not lts2xbar's 80 x 32)
    assert q["bandwidth_bytes_per_s_l2"].iat[0] == 32 * 96 * 1.5e9


def test_without_a_write_inclusive_counter_the_value_is_a_lower_bound() -> None:
    q = derive(_kernel(**{"dram__bytes.sum": 1000.0, "lts__lts2xbar_cycles_active.sum": 10.0}))
    assert q["bytes_l2"].iat[0] == 320.0
    assert ("reads only, below DRAM bytes: a lower bound; collect lts__t_bytes.sum"
            in q["bytes_source_l2"].iat[0])


def test_read_heavy_kernel_keeps_its_counter() -> None:
    # lts2xbar 320 B >= DRAM 100 B: nothing to fix
    q = derive(_kernel(**{"dram__bytes.sum": 100.0, "lts__lts2xbar_cycles_active.sum": 10.0,
                          "lts__t_sectors.sum": 40.0}))
    assert (q["bytes_l2"].iat[0] == 320.0
            and q["bytes_source_l2"].iat[0] == "32 × lts__lts2xbar_cycles_active.sum")
