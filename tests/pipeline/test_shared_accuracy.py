"""Accuracy against Nsight Compute's own numbers, over every real export in ../shared/fixtures.

For each file in {csv,converted,synthetic} that nsroof.importers.read accepts, nsroof's achieved
rates (bytes per level / duration_s, FP32 FLOPs / duration_s) and its ceilings must equal what ncu
itself reports within 1%. To keep the comparison from being circular, the ncu rate under test is
removed from the kernel table before nsroof recomputes the quantity, so that nsroof rebuilds it
from totals (or another counter) of the same definition; only where the export holds nothing but
that rate is the rate × duration round trip compared (labelled `rate-only`). Ceilings are checked
against independent ncu figures: its derived__sm__…_x2/_x4 peaks, the pct_of_peak_sustained_elapsed
ratios, and the tensor paths' peak_sustained_elapsed.per_second.

Which fixtures exercise which path is pinned below (EXPECTED_COVERAGE), so the test cannot pass
by comparing nothing.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from nsroof import importers
from nsroof.counters import metric_formulas as mf
from nsroof.counters import tensor_paths as tp
from nsroof.counters.quantities import derive
from nsroof.errors import NsroofError

FOLDERS = ("csv", "converted", "synthetic")
REL_TOL = 0.01
# ncu prints percentages with two decimals: below 1% that rounding alone exceeds the tolerance
MIN_PCT = 1.0

DEFINITION_OF = {f.provenance: f.definition for f in mf.FORMULAS}


@dataclass(frozen=True)
class Comparison:
    file: str
    kernel: int
    check: str
    path: str  # how nsroof got its number (the formula), or 'rate-only'
    nsroof: float
    ncu: float

    @property
    def ok(self) -> bool:
        return math.isclose(self.nsroof, self.ncu, rel_tol=REL_TOL, abs_tol=1e-9)

    def __str__(self) -> str:
        return (f"{self.file} #{self.kernel} {self.check}: nsroof {self.nsroof:.6g} vs ncu {self.ncu:.6g} "
                f"via {self.path}")


Exports = dict[str, pd.DataFrame]


@pytest.fixture(scope="module")
def exports(shared_fixtures: Path) -> Exports:
    """Every shared ncu CSV export the importer reads, by 'folder/name'. Files it rejects with a
    clean NsroofError (the error-only log) are another test's subject; any other failure raises here.
    Files of other formats (the ncu text-page capture in synthetic/) hold no ncu CSV to compare."""
    out: Exports = {}
    for folder in FOLDERS:
        for path in sorted((shared_fixtures / folder).glob("*")):
            try:
                if importers.sniff(path) != "ncu-csv":
                    continue
                kernels, kernels_facts = importers.read(path)
            except NsroofError:
                continue
            # the file facts in attrs are not needed here, and pandas deep-copies them on every access
            kernels.attrs = {}
            out[f"{folder}/{path.name}"] = kernels
    return out


def col(k: pd.DataFrame, name: str) -> np.ndarray:
    if name not in k.columns:
        return np.full(len(k), np.nan)
    return pd.to_numeric(k[name], errors="coerce").to_numpy(dtype="float64", na_value=np.nan)


def without(k: pd.DataFrame, predicate: Callable[[str], bool]) -> pd.DataFrame:
    return k.drop(columns=[c for c in k.columns if predicate(str(c))])


def rate_comparisons(exports: Exports, check: str, level: str, ncu_rate: str, definition: str | None,
                     drop: tuple[str, ...] = ()) -> Iterator[Comparison]:
    """nsroof bytes_<level> / duration_s against ncu's byte rate `ncu_rate`.

    nsroof recomputes the bytes with `ncu_rate` (and the other rates in `drop`) removed from the
    table, so that it cannot read the answer back; that independent number counts only if its
    formula has the byte definition of `ncu_rate`. Otherwise the round trip is labelled rate-only."""
    for name, k in exports.items():
        ncu = col(k, ncu_rate)
        if np.isnan(ncu).all():
            continue
        full = derive(k)
        independent = derive(without(k, lambda c: c == ncu_rate or c in drop))
        for i in np.flatnonzero(~np.isnan(ncu)):
            source = str(independent[f"bytes_source_{level}"].iat[i])
            # a read-only counter's value keeps its formula, with a note in parentheses
            # (quantities._write_inclusive)
            if source and (definition is None or DEFINITION_OF.get(source.split(" (")[0]) == definition):
                value, path = independent[f"bytes_{level}"].iat[i], source
            elif "write-inclusive" in str(full[f"bytes_source_{level}"].iat[i]):
                # a read-only counter below DRAM bytes: nsroof took the level's write-inclusive counter
                # (quantities.READ_ONLY_DEFINITIONS), which ncu_rate does not measure
                continue
            else:
                value, path = full[f"bytes_{level}"].iat[i], "rate-only"
            duration = full["duration_s"].iat[i]
            if np.isnan(value) or np.isnan(duration):
                continue
            yield Comparison(name, int(k["kernel_id"].iat[i]), check, path, value / duration, float(ncu[i]))


def assert_all_close(comparisons: list[Comparison]) -> None:
    bad = [str(c) for c in comparisons if not c.ok]
    assert not bad, "\n".join(bad)


def covered(comparisons: list[Comparison], *, independent_only: bool = False) -> set[str]:
    return {c.file for c in comparisons if not independent_only or c.path != "rate-only"}


# Fixtures that must take part in each check (pinned from a run of this test; more may join).
EXPECTED_COVERAGE: dict[str, set[str]] = {
    "dram": {"converted/alprielse__2025-04-21-77_06-MT.raw_base.csv",
             "converted/alprielse__2025-04-21-77_06-MT.raw_auto_enUS.csv",
             "converted/alprielse__silu-2025-04-18-v1.raw_base.csv",
             "converted/bautista__report_name.raw_base.csv", "converted/lashi__smemTranspose.raw_base.csv",
             "converted/speedyscan__profile.raw_base.csv",
             "converted/jakeflasher__standard_window-128.raw_base.csv",
             "csv/llmperfopt__k0016_gemm_ncu.details.csv"},
    "l2": {"converted/alprielse__2025-04-21-77_06-MT.raw_base.csv",
           "converted/alprielse__silu-2025-04-18-v1.raw_base.csv"},
    "l1": {"converted/alprielse__2025-04-21-77_06-MT.raw_base.csv",
           "converted/alprielse__silu-2025-04-18-v1.raw_base.csv"},
    "fp32": {"converted/alprielse__2025-04-21-77_06-MT.raw_base.csv",
             "converted/alprielse__silu-2025-04-18-v1.raw_base.csv",
             "converted/averyclapp__profile_output.raw_base.csv",
             "converted/bautista__report_name.raw_base.csv", "converted/speedyscan__profile.raw_base.csv"},
    "peak_flops": {"converted/alprielse__2025-04-21-77_06-MT.raw_base.csv",
                   "converted/alprielse__silu-2025-04-18-v1.raw_base.csv",
                   "converted/averyclapp__profile_output.raw_base.csv",
                   "converted/bautista__report_name.raw_base.csv",
                   "converted/speedyscan__profile.raw_base.csv",
                   "csv/llmperfopt__k0016_gemm_ncu.section_SpeedOfLight_RooflineChart.csv"},
    "bandwidth": {"converted/alprielse__2025-04-21-77_06-MT.raw_base.csv",
                  "converted/alprielse__silu-2025-04-18-v1.raw_base.csv"},
    "tensor_peak": {"converted/alprielse__2025-04-21-77_06-MT.raw_base.csv",
                    "converted/alprielse__silu-2025-04-18-v1.raw_base.csv"},
}


def assert_covers(check: str, files: set[str]) -> None:
    missing = EXPECTED_COVERAGE[check] - files
    assert not missing, f"{check}: these exports no longer take part: {sorted(missing)}"


# --- achieved rates ----------------------------------------------------------------------------


def test_dram_bytes_per_second(exports: Exports) -> None:
    comps = list(rate_comparisons(exports, "dram B/s", "dram", "dram__bytes.sum.per_second", None,
                                  drop=("dram__bytes_read.sum.per_second",
                                        "dram__bytes_write.sum.per_second")))
    assert_all_close(comps)
    assert_covers("dram", covered(comps))
    # the full-set raw pages hold dram__bytes_read/write.sum: the comparison there is from totals
    totals = {c.path for c in comps if c.file.endswith("77_06-MT.raw_base.csv")}
    assert totals == {"dram__bytes_read.sum + dram__bytes_write.sum"}


def test_l2_bytes_per_second(exports: Exports) -> None:
    # without ncu's derived rate, nsroof counts 32 B per lts2xbar active cycle (the raw counter)
    # the write-inclusive lts__t counters are left out, so that lts2xbar's own bytes are what is compared
    # even where a write-heavy kernel's report takes lts__t (quantities.READ_ONLY_DEFINITIONS)
    lts_t = tuple(c for k in exports.values() for c in k.columns
                  if str(c).startswith(("lts__t_bytes", "lts__t_sectors")))
    comps = list(rate_comparisons(exports, "L2 B/s", "l2", "derived__lts__lts2xbar_bytes.sum.per_second",
                                  "lts2xbar", drop=lts_t))
    comps += list(rate_comparisons(exports, "L2 B/s (lts__t)", "l2", "lts__t_bytes.sum.per_second", "lts__t"))
    assert_all_close(comps)
    assert_covers("l2", covered(comps, independent_only=True))


def test_l1_bytes_per_second(exports: Exports) -> None:
    comps = []
    l1tex_t = tuple(c for k in exports.values() for c in k.columns
                    if str(c).startswith(("l1tex__t_bytes", "l1tex__t_sectors")))
    for suffix, definition in (("lgds", "lsu_lgds"), ("lg", "lsu_lg")):
        comps += list(rate_comparisons(exports, f"L1 B/s ({suffix})", "l1",
                                       f"derived__l1tex__lsu_writeback_bytes_mem_{suffix}.sum.per_second",
                                       definition, drop=l1tex_t))
    comps += list(rate_comparisons(exports, "L1 B/s (l1tex__t)", "l1", "l1tex__t_bytes.sum.per_second",
                                   "l1tex__t"))
    assert_all_close(comps)
    assert_covers("l1", covered(comps, independent_only=True))
    # from the writeback-cycle totals (× 128 B), not from the rate read back
    assert {c.path.split(" (")[0] for c in comps if c.file.endswith("77_06-MT.raw_base.csv")} == {
        "128 × l1tex__lsu_writeback_active_mem_lg.sum"}


def ncu_fp32_rate(k: pd.DataFrame) -> np.ndarray:
    """ncu's achieved FP32 work [S1]: (fadd + fmul + 2 × ffma) per cycle ×
    smsp__cycles_elapsed.avg.per_second, with ncu's own derived__smsp__…ffma_pred_on_x2 for 2 × ffma where the
    export has it."""
    pc = ".per_cycle_elapsed"
    ffma2 = col(k, "derived__smsp__sass_thread_inst_executed_op_ffma_pred_on_x2")
    ffma2 = np.where(np.isnan(ffma2), 2 * col(k, f"smsp__sass_thread_inst_executed_op_ffma_pred_on.sum{pc}"),
                     ffma2)
    work = (col(k, f"smsp__sass_thread_inst_executed_op_fadd_pred_on.sum{pc}")
            + col(k, f"smsp__sass_thread_inst_executed_op_fmul_pred_on.sum{pc}") + ffma2)
    return work * col(k, "smsp__cycles_elapsed.avg.per_second")


def test_fp32_flop_per_second(exports: Exports) -> None:
    comps = []
    for name, k in exports.items():
        ncu = ncu_fp32_rate(k)
        q = derive(k)
        for i in np.flatnonzero(~np.isnan(ncu)):
            flops, duration = q["flops_fp32"].iat[i], q["duration_s"].iat[i]
            if np.isnan(flops) or np.isnan(duration):
                continue
            comps.append(Comparison(name, int(k["kernel_id"].iat[i]), "FP32 FLOP/s",
                                    str(q["flops_source_fp32"].iat[i]), flops / duration, float(ncu[i])))
    assert_all_close(comps)
    assert_covers("fp32", covered(comps))
    # where the elapsed-cycle total exists, nsroof multiplies by it, not by clock × duration
    assert any(c.path.endswith("× smsp__cycles_elapsed.avg") for c in comps)


# --- ceilings ----------------------------------------------------------------------------------


def test_compute_ceilings_match_ncu_derived_peaks(exports: Exports) -> None:
    # ncu's derived__sm__…_pred_on_x2/_x4 is its peak work per cycle with the FLOP factor applied
    derived_peak = {"fp32": "derived__sm__sass_thread_inst_executed_op_ffma_pred_on_x2",
                    "fp64": "derived__sm__sass_thread_inst_executed_op_dfma_pred_on_x2",
                    "fp16": "derived__sm__sass_thread_inst_executed_op_hfma_pred_on_x4"}
    comps = []
    for name, k in exports.items():
        q = derive(without(k, lambda c: c in derived_peak.values()))
        for p, metric in derived_peak.items():
            ncu = col(k, metric) * col(k, "sm__cycles_elapsed.avg.per_second")
            for i in np.flatnonzero(~np.isnan(ncu) & ~np.isnan(q[f"peak_flop_per_s_{p}"].to_numpy())):
                comps.append(Comparison(name, int(k["kernel_id"].iat[i]), f"{p} peak",
                                        str(q[f"ceiling_source_{p}"].iat[i]),
                                        q[f"peak_flop_per_s_{p}"].iat[i], float(ncu[i])))
    assert_all_close(comps)
    assert_covers("peak_flops", covered(comps))
    assert {c.check for c in comps} == {"fp32 peak", "fp64 peak", "fp16 peak"}


def test_bandwidth_ceilings_match_ncu_percent_of_peak(exports: Exports) -> None:
    # ncu's X.pct_of_peak_sustained_elapsed = X.per_second / peak: the peak it implies is rate / pct
    probes = (
        ("dram", "dram__bytes_read.sum.per_second", "dram__bytes_read.sum.pct_of_peak_sustained_elapsed"),
        ("dram", "dram__bytes_write.sum.per_second", "dram__bytes_write.sum.pct_of_peak_sustained_elapsed"),
        ("l2", "derived__lts__lts2xbar_bytes.sum.per_second",
         "lts__lts2xbar_cycles_active.sum.pct_of_peak_sustained_elapsed"),
        # a write-heavy kernel's L2 roof is the lts__t one (its bytes come from lts__t_sectors):
        # 32 B per sector
        ("l2", "lts__t_sectors.sum.per_second", "lts__t_sectors.sum.pct_of_peak_sustained_elapsed"),
        ("l1", "derived__l1tex__lsu_writeback_bytes_mem_lg.sum.per_second",
         "l1tex__lsu_writeback_active_mem_lg.sum.pct_of_peak_sustained_elapsed"),
        ("l1", "derived__l1tex__lsu_writeback_bytes_mem_lgds.sum.per_second",
         "l1tex__lsu_writeback_active_mem_lgds.sum.pct_of_peak_sustained_elapsed"),
    )
    comps = []
    for name, k in exports.items():
        q = derive(k)
        for level, rate, pct in probes:
            pct_v = col(k, pct)
            with np.errstate(divide="ignore", invalid="ignore"):
                implied = col(k, rate) * (32.0 if "_sectors" in rate else 1.0) / (pct_v / 100.0)
            ours = q[f"bandwidth_bytes_per_s_{level}"].to_numpy()
            # each probe checks the roof of its own counter: the row's roof must be of that definition
            same = np.array([("lts__t" in str(src)) == ("lts__t" in rate)
                             for src in q[f"ceiling_source_{level}"]])
            for i in np.flatnonzero((pct_v >= MIN_PCT) & ~np.isnan(implied) & ~np.isnan(ours) & same):
                comps.append(Comparison(name, int(k["kernel_id"].iat[i]), f"{level} bandwidth ({pct})",
                                        str(q[f"ceiling_source_{level}"].iat[i]), ours[i], float(implied[i])))
    assert_all_close(comps)
    assert_covers("bandwidth", covered(comps))
    assert {c.check.split()[0] for c in comps} == {"dram", "l2", "l1"}


def test_tensor_ceiling_matches_ncu_peak_rate(exports: Exports) -> None:
    # The kernels in these exports run no tensor work, so no path dominates. Make each dense/sparse
    # path in turn the only one with work: nsroof's tensor ceiling must then equal ncu's own
    # <path>.sum.peak_sustained_elapsed.per_second for that kernel.
    comps = []
    for name, k in exports.items():
        paths = [p for p in tp.select_tensor_metrics(k.columns) if p.sparsity != "unsplit"]
        for p in paths:
            ncu = col(k, f"{p.base}.sum.peak_sustained_elapsed.per_second")
            if np.isnan(ncu).all():
                continue
            probe = k.copy()
            for other in paths:
                probe[f"{other.base}.sum"] = 1.0 if other is p else 0.0
            q = derive(probe)
            assert (q["tensor_metric"] == p.base).all()
            for i in np.flatnonzero(~np.isnan(ncu)):
                comps.append(Comparison(name, int(k["kernel_id"].iat[i]), f"tensor peak {p.base}",
                                        str(q["ceiling_source_tensor"].iat[i]),
                                        q["peak_flop_per_s_tensor"].iat[i], float(ncu[i])))
    assert_all_close(comps)
    assert_covers("tensor_peak", covered(comps))


def test_unsplit_aggregate_tensor_peak_is_the_sparse_rate(exports: Exports) -> None:
    # Why nsroof refuses an unsplit aggregate's peak as a dense ceiling: on the GH200 export,
    # src_fp16's peak equals the 2:4-sparse hgmma peak and twice the dense one.
    k = exports["converted/alprielse__silu-2025-04-18-v1.raw_base.csv"]
    t = tp.TENSOR_PREFIX
    aggregate = col(k, f"{t}src_fp16.sum.peak_sustained")[0]
    assert aggregate == col(k, f"{t}op_hgmma_src_fp16_sparsity_on.sum.peak_sustained")[0]
    assert aggregate == 2 * col(k, f"{t}op_hgmma_src_fp16_sparsity_off.sum.peak_sustained")[0]


def test_duration_from_cycles_agrees_with_gpu_time(exports: Exports) -> None:
    # NERSC's time (sm__cycles_elapsed.avg / sm__cycles_elapsed.avg.per_second) against ncu's Duration
    comps = []
    for name, k in exports.items():
        ncu = col(k, "gpu__time_duration.sum")
        q = derive(without(k, lambda c: c == "gpu__time_duration.sum"))
        for i in np.flatnonzero(~np.isnan(ncu) & ~np.isnan(q["duration_s"].to_numpy())):
            comps.append(Comparison(name, int(k["kernel_id"].iat[i]), "duration",
                                    str(q["duration_source"].iat[i]), q["duration_s"].iat[i], float(ncu[i])))
    assert_all_close(comps)
    assert {"converted/alprielse__2025-04-21-77_06-MT.raw_base.csv",
            "converted/alprielse__silu-2025-04-18-v1.raw_base.csv",
            "csv/leleucas__nsight_virtual.csv"} <= covered(comps)
