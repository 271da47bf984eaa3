"""The single table of counter formulas: how each roofline quantity is rebuilt from ncu metrics.

Every entry of FORMULAS is data: the quantity it yields, the metrics it needs, how they combine
(a linear combination times/over other metrics), flags, and the source of the formula. For each
quantity, entries are tried in table order, per kernel: the first whose inputs are all present
wins and its `expression` is recorded as provenance. nsroof.counters.quantities evaluates the table;
`required_metrics()` turns it into the `--metrics` list `nsroof ncu` passes; `render_markdown()`
documents it (docs/readme/formulas.md, kept in step by a test).

Metric values are in SI base units as the importers deliver them: bytes, seconds, counts, and
`.per_second` rates in 1/second (byte/second for bytes); `.per_cycle_elapsed` and
`.peak_sustained` values are per cycle of the unit named in the metric.

Sources:
  [S1] Nsight Compute 2025.3.1 sections SpeedOfLight_RooflineChart / Hierarchical{Single,Double,Half,
       Tensor}RooflineChart: peak = X.sum.peak_sustained × unit__cycles_elapsed.avg.per_second,
       achieved = X.sum.per_cycle_elapsed × cycles/second, FP32 = fadd + fmul + 2 × ffma,
       FP16 = 2 × hadd + 2 × hmul + 4 × hfma, tensor = sm__ops_path_tensor_*.
  [S2] NERSC roofline method (Yang, Kurth, Williams 2020): time = sm__cycles_elapsed.avg /
       sm__cycles_elapsed.avg.per_second; bytes = dram__bytes.sum, lts__t_bytes.sum, l1tex__t_bytes.sum;
       tensor = 512 × sm__inst_executed_pipe_tensor.sum on V100 (HMMA.884).
  [S3] Sector size: L2/DRAM/L1TEX sectors are 32 bytes (libnvperf metric descriptions).
  [S4] ncu sections ~2022–2025: L1 = l1tex__lsu_writeback_active_mem_lg[ds] × 128 B/cycle,
       L2 = lts__lts2xbar_cycles_active × 32 B/cycle (derived__lts__lts2xbar_bytes).
  [S5] ncu 2026.x on sm_120 renames dram__bytes_read/write to dram__bytes_op_read/write
       (real export csv/olajide__saxpy.csv).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from nsroof import markdown
from nsroof.counters.tensor_paths import (
    TENSOR_PREFIX,
    no_dram_ccs,
    normalize_cc,
    tensor_families,
    tensor_metric_names,
    tensor_shapes_by_cc,
)
from nsroof.errors import NsroofError

# Pseudo-input: the kernel's duration as derived by the duration formulas (not an ncu metric).
DURATION = "duration_s"
# Pseudo-input of the tensor estimate: the per-architecture FLOPs per tensor-pipe instruction.
TENSOR_FLOP_PER_INST = "flop_per_tensor_inst[cc]"




@dataclass(frozen=True)
class CounterFormula:
    """One way to compute one quantity.

    value = (Σ coefficient × metric) × Π times ÷ Π divide_by, evaluated only where every input is a
    number (a counter present and 0 contributes 0; an absent one makes the formula not apply).
    kind "tensor_ops" sums the sm__ops_path_tensor_* metrics the export holds (see
    select_tensor_metrics); kind "tensor_peak" takes the peak of the kernel's dominant tensor metric.
    """

    quantity: str
    terms: tuple[tuple[float, str], ...] = ()
    times: tuple[str, ...] = ()
    divide_by: tuple[str, ...] = ()
    kind: str = "linear"
    # which definition of "bytes at this level" (pairs bytes with the bandwidth of the same definition)
    definition: str = ""
    estimated: bool = False
    cc_max: float | None = None  # applies only to kernels whose compute capability is <= this
    tensor_suffix: str = ""  # kind tensor_ops: the metric suffix summed (".sum", ".sum.per_cycle_elapsed")
    source: str = ""
    # metric sets of required_metrics() that collect this formula's inputs
    collect: tuple[str, ...] = ()
    # the value is a lower bound (a partial counter set, see PARTIAL_RULES): its provenance says so
    lower_bound: str = ""

    @property
    def metrics(self) -> tuple[str, ...]:
        """The ncu metrics this formula reads (pseudo-inputs excluded), in order, without repeats."""
        names = [m for _, m in self.terms] + list(self.times) + list(self.divide_by)
        if self.kind == "tensor_ops":
            names.insert(0, f"{TENSOR_PREFIX}*{self.tensor_suffix}")
        if self.kind == "tensor_peak":
            names.insert(0, f"{TENSOR_PREFIX}<dominant>.sum.peak_sustained")
        out: list[str] = []
        for n in names:
            if n not in (DURATION, TENSOR_FLOP_PER_INST) and n not in out:
                out.append(n)
        return tuple(out)

    @property
    def expression(self) -> str:
        """Provenance text, e.g. 'dram__bytes_read.sum + dram__bytes_write.sum'."""
        if self.kind == "tensor_ops":
            core = f"Σ {TENSOR_PREFIX}*{self.tensor_suffix}"
        elif self.kind == "tensor_peak":
            core = f"{TENSOR_PREFIX}<dominant>.sum.peak_sustained"
        else:
            parts = [m if c == 1 else f"{c:g} × {m}" for c, m in self.terms]
            core = " + ".join(parts)
            if len(parts) > 1 and (self.times or self.divide_by):
                core = f"({core})"
        for t in self.times:
            core += f" × {t}"
        for d in self.divide_by:
            core += f" / {d}"
        return core

    @property
    def provenance(self) -> str:
        """What the report records: ceilings read from the export are prefixed 'ncu:'; a lower bound
        says so and why."""
        if self.quantity.startswith(("peak_flop_per_s_", "bandwidth_bytes_per_s_")):
            return f"ncu:{self.expression}"
        if self.lower_bound:
            return f"{self.expression} (lower bound: {self.lower_bound})"
        return self.expression


# ---------------------------------------------------------------------------------------------
# Building blocks (the table below is written with these so that each entry stays one line).

_FLOP_OPS: dict[str, tuple[tuple[float, str], ...]] = {
    # ncu's convention [S1]: FMA = 2; packed half HFMA2 = 4, HADD2/HMUL2 = 2.
    "fp64": ((1, "dadd"), (1, "dmul"), (2, "dfma")),
    "fp32": ((1, "fadd"), (1, "fmul"), (2, "ffma")),
    "fp16": ((2, "hadd"), (2, "hmul"), (4, "hfma")),
}
# ncu's derived__smsp__…_x2/_x4 metrics = the per-cycle count already multiplied by the FLOP factor.
_DERIVED_SUFFIX: dict[str, str] = {"dadd": "", "dmul": "", "dfma": "_x2", "fadd": "", "fmul": "",
                                   "ffma": "_x2", "hadd": "_x2", "hmul": "_x2", "hfma": "_x4"}
_PEAK_OP: dict[str, tuple[str, int]] = {"fp64": ("dfma", 2), "fp32": ("ffma", 2), "fp16": ("hfma", 4)}


def _sass(unit: str, op: str, suffix: str = "") -> str:
    return f"{unit}__sass_thread_inst_executed_op_{op}_pred_on.sum{suffix}"


def _derived_smsp(op: str) -> str:
    return f"derived__smsp__sass_thread_inst_executed_op_{op}_pred_on{_DERIVED_SUFFIX[op]}"


def _flop_formulas(p: str) -> list[CounterFormula]:
    ops = _FLOP_OPS[p]
    q = f"flops_{p}"
    # nsroof ncu collects the sm__ totals; fp16 is not part of the minimal set
    collect = ("roofline",) if p == "fp16" else ("roofline", "minimal")
    totals = [CounterFormula(q, tuple((c, _sass(u, op)) for c, op in ops), source="[S1] [S2]",
                      collect=collect if u == "sm" else ())
              for u in ("sm", "smsp")]
    per_cycle = tuple((c, _sass("smsp", op, ".per_cycle_elapsed")) for c, op in ops)
    # derived__smsp__…_x2 already holds the factor: coefficient 1 for those terms
    derived = tuple((1.0, _derived_smsp(op)) if _DERIVED_SUFFIX[op]
                    else (c, _sass("smsp", op, ".per_cycle_elapsed"))
                    for c, op in ops)
    sm_per_cycle = tuple((c, _sass("sm", op, ".per_cycle_elapsed")) for c, op in ops)
    rates = [
        CounterFormula(q, per_cycle, times=("smsp__cycles_elapsed.avg",),
                       source="[S1] achieved work × elapsed cycles"),
        CounterFormula(q, per_cycle, times=("smsp__cycles_elapsed.avg.per_second", DURATION),
                       source="[S1] achieved FLOP/s × duration"),
        CounterFormula(q, derived, times=("smsp__cycles_elapsed.avg",),
                       source="[S1] derived__smsp__… variant"),
        CounterFormula(q, derived, times=("smsp__cycles_elapsed.avg.per_second", DURATION),
                       source="[S1] derived__smsp__… variant"),
        CounterFormula(q, sm_per_cycle, times=("sm__cycles_elapsed.avg",), source="[S1] (sm__ unit)"),
    ]
    return totals + rates


def _flop_peak_formulas(p: str) -> list[CounterFormula]:
    op, factor = _PEAK_OP[p]
    q = f"peak_flop_per_s_{p}"
    clock = "sm__cycles_elapsed.avg.per_second"
    out = [
        CounterFormula(q, ((factor, _sass("sm", op, ".peak_sustained")),), times=(clock,), source="[S1]",
                collect=("roofline",)),
        CounterFormula(q, ((1, f"derived__sm__sass_thread_inst_executed_op_{op}_pred_on_x{factor}"),),
                times=(clock,), source="[S1] derived__sm__… = peak_sustained × factor"),
    ]
    if p == "fp16":
        # ncu ≤ 2023 exported derived__sm__…hfma_pred_on_x2 (HFMA counted 2); × 2 restores ncu's current 4.
        out.append(CounterFormula(q, ((2, "derived__sm__sass_thread_inst_executed_op_hfma_pred_on_x2"),),
                           times=(clock,),
                           source="older ncu derived metric (HFMA = 2), rescaled to HFMA2 = 4"))
    return out


def _bytes(level: str, definition: str, terms: tuple[tuple[float, str], ...], *,
           times: tuple[str, ...] = (), source: str, collect: tuple[str, ...] = (),
           cc_max: float | None = None, lower_bound: str = "") -> CounterFormula:
    return CounterFormula(f"bytes_{level}", terms, times=times, definition=definition, source=source,
                          collect=collect, cc_max=cc_max, lower_bound=lower_bound)


def _bw(level: str, definition: str, terms: tuple[tuple[float, str], ...], clock: str, *, source: str,
        collect: tuple[str, ...] = (), cc_max: float | None = None) -> CounterFormula:
    return CounterFormula(f"bandwidth_bytes_per_s_{level}", terms, times=(clock,), definition=definition,
                   source=source, collect=collect, cc_max=cc_max)


_ONE = 1.0
_NO_WRITES = "DRAM reads only, no write counter collected"
_R = ("roofline",)
_RM = ("roofline", "minimal")

# ---------------------------------------------------------------------------------------------
# THE TABLE. Order within a quantity = precedence.

FORMULAS: tuple[CounterFormula, ...] = (
    # duration -----------------------------------------------------------------------------
    CounterFormula("duration_s", ((_ONE, "gpu__time_duration.sum"),), source="ncu Duration", collect=_RM),
    CounterFormula("duration_s", ((_ONE, "sm__cycles_elapsed.avg"),),
            divide_by=("sm__cycles_elapsed.avg.per_second",), source="[S2] NERSC time", collect=_R),
    CounterFormula("duration_s", ((_ONE, "smsp__cycles_elapsed.avg"),),
            divide_by=("smsp__cycles_elapsed.avg.per_second",), source="[S2] with the smsp__ unit"),
    # FLOPs on CUDA cores ---------------------------------------------------------------------
    *_flop_formulas("fp64"),
    *_flop_formulas("fp32"),
    *_flop_formulas("fp16"),
    # FLOPs on tensor cores -------------------------------------------------------------------
    CounterFormula("flops_tensor", kind="tensor_ops", tensor_suffix=".sum", source="[S1] tensor section",
            collect=_R),
    CounterFormula("flops_tensor", kind="tensor_ops", tensor_suffix=".sum.per_cycle_elapsed",
            times=("sm__cycles_elapsed.avg",), source="[S1] achieved ops/cycle × elapsed cycles"),
    CounterFormula("flops_tensor", kind="tensor_ops", tensor_suffix=".sum.per_cycle_elapsed",
            times=("sm__cycles_elapsed.avg.per_second", DURATION), source="[S1] achieved ops/s × duration"),
    CounterFormula("flops_tensor", ((_ONE, "sm__inst_executed_pipe_tensor.sum"),),
            times=(TENSOR_FLOP_PER_INST,), kind="tensor_estimate", estimated=True,
            source="[S2] one instruction shape per architecture (estimate)"),
    CounterFormula("flops_tensor", ((_ONE, "smsp__inst_executed_pipe_tensor.sum"),),
            times=(TENSOR_FLOP_PER_INST,), kind="tensor_estimate", estimated=True,
            source="[S2] one instruction shape per architecture (estimate)"),
    # DRAM bytes --------------------------------------------------------------------------------
    _bytes("dram", "dram", ((_ONE, "dram__bytes.sum"),), source="[S2]", collect=_RM),
    _bytes("dram", "dram", ((_ONE, "dram__bytes_read.sum"), (_ONE, "dram__bytes_write.sum")),
           source="libnvperf split"),
    _bytes("dram", "dram", ((_ONE, "dram__bytes_op_read.sum"), (_ONE, "dram__bytes_op_write.sum")),
           source="[S5]"),
    _bytes("dram", "dram", ((_ONE, "dram__bytes.sum.per_second"),), times=(DURATION,),
           source="[S1] achieved × duration"),
    _bytes("dram", "dram",
           ((_ONE, "dram__bytes_read.sum.per_second"), (_ONE, "dram__bytes_write.sum.per_second")),
           times=(DURATION,), source="libnvperf split × duration"),
    _bytes("dram", "dram", ((32, "dram__sectors_read.sum"), (32, "dram__sectors_write.sum")), source="[S3]"),
    _bytes("dram", "dram", ((32, "dram__sectors.sum"),), source="[S3]"),
    # read counters without their write twins: what DRAM moved at least (PARTIAL_RULES)
    _bytes("dram", "dram", ((_ONE, "dram__bytes_read.sum"),), source="libnvperf split, read half",
           lower_bound=_NO_WRITES),
    _bytes("dram", "dram", ((_ONE, "dram__bytes_op_read.sum"),), source="[S5] read half",
           lower_bound=_NO_WRITES),
    _bytes("dram", "dram", ((32, "dram__sectors_read.sum"),), source="[S3] read half",
           lower_bound=_NO_WRITES),
    # L2 bytes ------------------------------------------------------------------------------------
    _bytes("l2", "lts__t", ((_ONE, "lts__t_bytes.sum"),), source="[S2]", collect=_R),
    _bytes("l2", "lts__t", ((_ONE, "lts__t_bytes.sum.per_second"),), times=(DURATION,),
           source="ncu ≤2021 roofline × duration"),
    _bytes("l2", "lts2xbar", ((32, "lts__lts2xbar_cycles_active.sum"),), source="[S4]"),
    _bytes("l2", "lts2xbar", ((_ONE, "derived__lts__lts2xbar_bytes.sum.per_second"),), times=(DURATION,),
           source="[S1] [S4] achieved × duration"),
    _bytes("l2", "lts2xbar", ((32, "lts__lts2xbar_cycles_active.sum.per_second"),), times=(DURATION,),
           source="[S4]"),
    _bytes("l2", "lts__t", ((32, "lts__t_sectors.sum"),), source="[S3]"),
    _bytes("l2", "lts__t", ((32, "lts__t_sectors.sum.per_second"),), times=(DURATION,), source="[S3]"),
    # L1 bytes ------------------------------------------------------------------------------------
    _bytes("l1", "l1tex__t", ((_ONE, "l1tex__t_bytes.sum"),), source="[S2]", collect=_R),
    _bytes("l1", "l1tex__t", ((_ONE, "l1tex__t_bytes.sum.per_second"),), times=(DURATION,),
           source="ncu ≤2021 roofline × duration"),
    _bytes("l1", "lsu_lgds", ((128, "l1tex__lsu_writeback_active_mem_lgds.sum"),),
           source="[S4] CC ≥ 9.0"),
    _bytes("l1", "lsu_lgds", ((_ONE, "derived__l1tex__lsu_writeback_bytes_mem_lgds.sum.per_second"),),
           times=(DURATION,), source="[S1] [S4] achieved × duration"),
    _bytes("l1", "lsu_lg", ((128, "l1tex__lsu_writeback_active_mem_lg.sum"),), source="[S4] CC 7.5–8.9"),
    _bytes("l1", "lsu_lg", ((_ONE, "derived__l1tex__lsu_writeback_bytes_mem_lg.sum.per_second"),),
           times=(DURATION,), source="[S1] [S4] achieved × duration"),
    _bytes("l1", "l1tex__t", ((32, "l1tex__t_sectors.sum"),), source="[S3]"),
    _bytes("l1", "lsu", ((128, "l1tex__lsu_writeback_active.sum"),), source="[S4] CC ≤ 7.2",
           cc_max=7.2),
    # the clocks the export recorded: datasheet ceilings are scaled to them (roofs.machines.at_clocks) -
    CounterFormula("clock_hz_sm", ((_ONE, "sm__cycles_elapsed.avg.per_second"),),
                   source="[S1] the SM clock of ncu's FLOP roofs"),
    CounterFormula("clock_hz_sm", ((_ONE, "smsp__cycles_elapsed.avg.per_second"),),
                   source="[S1] (smsp__ unit, same clock)"),
    CounterFormula("clock_hz_dram", ((_ONE, "dram__cycles_elapsed.avg.per_second"),),
                   source="[S1] the clock of ncu's DRAM roof"),
    CounterFormula("clock_hz_l2", ((_ONE, "lts__cycles_elapsed.avg.per_second"),),
                   source="[S1] the clock of ncu's L2 roof"),
    CounterFormula("clock_hz_l1", ((_ONE, "l1tex__cycles_elapsed.avg.per_second"),),
                   source="[S1] the clock of ncu's L1 roof"),
    # without the rate, the elapsed cycles over the duration: what ncu's `.per_second` is (A100 report
    # alprielse: lts__cycles_elapsed.avg 465,121 / 437.44 us = 1,063.28 MHz = its .per_second). A T4
    # export records lts__cycles_elapsed.avg only: its L2 runs at 854.7 MHz while the SMs run at 554.1 MHz,
    # so the SM clock in its place put the L2 roof 1.54x too low.
    *(CounterFormula(f"clock_hz_{q}", ((_ONE, f"{unit}__cycles_elapsed.avg"),), divide_by=(DURATION,),
                     source="[S1] elapsed cycles / duration (= the .per_second rate)")
      for q, unit in (("sm", "sm"), ("dram", "dram"), ("l2", "lts"), ("l1", "l1tex"))),
    # compute ceilings from the export ---------------------------------------------------------
    *_flop_peak_formulas("fp64"),
    *_flop_peak_formulas("fp32"),
    *_flop_peak_formulas("fp16"),
    CounterFormula("peak_flop_per_s_tensor", kind="tensor_peak",
            times=("sm__cycles_elapsed.avg.per_second",),
            source="[S1] tensor section, metric of the kernel's dominant tensor path", collect=_R),
    # bandwidth ceilings from the export: same definition as the bytes they divide -------------
    _bw("dram", "dram", ((_ONE, "dram__bytes.sum.peak_sustained"),), "dram__cycles_elapsed.avg.per_second",
        source="[S1]", collect=_R),
    _bw("l2", "lts__t", ((_ONE, "lts__t_bytes.sum.peak_sustained"),), "lts__cycles_elapsed.avg.per_second",
        source="ncu 2020.1 hierarchical section", collect=_R),
    _bw("l2", "lts2xbar", ((_ONE, "derived__lts__lts2xbar_bytes.sum.peak_sustained"),),
        "lts__cycles_elapsed.avg.per_second", source="[S1] [S4]"),
    _bw("l2", "lts2xbar", ((32, "lts__lts2xbar_cycles_active.sum.peak_sustained"),),
        "lts__cycles_elapsed.avg.per_second", source="[S1] [S4]"),
    _bw("l2", "lts__t", ((32, "lts__t_sectors.sum.peak_sustained"),), "lts__cycles_elapsed.avg.per_second",
        source="[S3]"),
    # --set full carries the per-slice peak only: × the slice count (ncu's pct_of_peak agrees)
    CounterFormula("bandwidth_bytes_per_s_l2", ((32, "lts__t_sectors.avg.peak_sustained"),),
                   definition="lts__t",
                   times=("device__attribute_l2s_count", "lts__cycles_elapsed.avg.per_second"),
                   source="[S3] per slice"),
    _bw("l1", "l1tex__t", ((_ONE, "l1tex__t_bytes.sum.peak_sustained"),),
        "l1tex__cycles_elapsed.avg.per_second",
        source="ncu 2020.1 hierarchical section", collect=_R),
    _bw("l1", "lsu_lgds", ((_ONE, "derived__l1tex__lsu_writeback_bytes_mem_lgds.sum.peak_sustained"),),
        "l1tex__cycles_elapsed.avg.per_second", source="[S1] [S4]"),
    _bw("l1", "lsu_lgds", ((128, "l1tex__lsu_writeback_active_mem_lgds.sum.peak_sustained"),),
        "l1tex__cycles_elapsed.avg.per_second", source="[S1] [S4]"),
    _bw("l1", "lsu_lg", ((_ONE, "derived__l1tex__lsu_writeback_bytes_mem_lg.sum.peak_sustained"),),
        "l1tex__cycles_elapsed.avg.per_second", source="[S1] [S4]"),
    _bw("l1", "lsu_lg", ((128, "l1tex__lsu_writeback_active_mem_lg.sum.peak_sustained"),),
        "l1tex__cycles_elapsed.avg.per_second", source="[S1] [S4]"),
    _bw("l1", "l1tex__t", ((32, "l1tex__t_sectors.sum.peak_sustained"),),
        "l1tex__cycles_elapsed.avg.per_second",
        source="[S3]"),
    CounterFormula("bandwidth_bytes_per_s_l1", ((32, "l1tex__t_sectors.avg.peak_sustained"),),
                   definition="l1tex__t",
                   times=("device__attribute_multiprocessor_count", "l1tex__cycles_elapsed.avg.per_second"),
                   source="[S3] per SM"),
    _bw("l1", "lsu", ((128, "l1tex__lsu_writeback_active.sum.peak_sustained"),),
        "l1tex__cycles_elapsed.avg.per_second", source="[S4] CC ≤ 7.2", cc_max=7.2),
)

QUANTITIES: tuple[str, ...] = tuple(dict.fromkeys(f.quantity for f in FORMULAS))

# The counter behind each byte definition above: the key of a machine's per-counter roof
# (nsroof.roofs.machines), so a datasheet roof is the one of the counter the bytes came from. lsu, lsu_lg and
# lsu_lgds are one LSU-writeback datapath (ncu's sections multiply each by 128 B at 1 active cycle per SM per
# cycle); lts__t and l1tex__t count every sector their tag stage served, lts2xbar only the L2 -> SM returns.
COUNTER_OF_DEFINITION: dict[str, str] = {"dram": "dram", "lts__t": "lts__t", "lts2xbar": "lts2xbar",
                                         "l1tex__t": "l1tex__t", "lsu": "lsu", "lsu_lg": "lsu",
                                         "lsu_lgds": "lsu"}
# ncu's own roof of each counter: what to collect so that the export carries it
COUNTER_PEAKS: dict[str, str] = {
    "dram": "dram__bytes.sum.peak_sustained and dram__cycles_elapsed.avg.per_second",
    "lts__t": "lts__t_bytes.sum.peak_sustained and lts__cycles_elapsed.avg.per_second",
    "lts2xbar": "lts__lts2xbar_cycles_active.sum.peak_sustained and lts__cycles_elapsed.avg.per_second",
    "l1tex__t": "l1tex__t_bytes.sum.peak_sustained and l1tex__cycles_elapsed.avg.per_second",
    "lsu": "l1tex__lsu_writeback_active_mem_lg.sum.peak_sustained (_mem_lgds from CC 9.0) and "
           "l1tex__cycles_elapsed.avg.per_second",
}


def formulas_for(quantity: str) -> tuple[CounterFormula, ...]:
    """The formulas for `quantity`, in order of precedence."""
    out = tuple(f for f in FORMULAS if f.quantity == quantity)
    if not out:
        raise KeyError(f"no formula for quantity {quantity!r}; known: {', '.join(QUANTITIES)}")
    return out


# ---------------------------------------------------------------------------------------------
# The metric list nsroof ncu collects.

METRIC_SETS: tuple[str, ...] = ("roofline", "minimal")


def required_metrics(cc: str | None = None, metric_set: str = "roofline") -> list[str]:
    """The exact `--metrics` list for `ncu`: the inputs of the preferred formula of every quantity
    (and, for `roofline`, of every ceiling), from the table above.

    `minimal` = duration + DRAM bytes + FP32/FP64 FLOPs. `roofline` adds FP16, tensor (the
    sm__ops_path_tensor_* metrics of the GPU family of `cc`; without a known family, the tensor-pipe
    instruction count), L2 and L1 bytes, and the peak metrics and clocks the ceilings need.
    """
    if metric_set not in METRIC_SETS:
        raise NsroofError(f"unknown metric set {metric_set!r}; choose one of: {', '.join(METRIC_SETS)}")
    norm = normalize_cc(cc)
    out: list[str] = []
    for f in FORMULAS:
        if metric_set not in f.collect:
            continue
        if norm in no_dram_ccs() and (f.quantity.endswith("_dram")):
            continue
        if f.kind in ("tensor_ops", "tensor_peak"):
            names = tensor_metric_names(cc)
            suffix = ".sum" if f.kind == "tensor_ops" else ".sum.peak_sustained"
            if names:
                out += [n + suffix for n in names]
            elif f.kind == "tensor_ops" and (norm == "" or float(norm) >= 7.0):
                out.append("sm__inst_executed_pipe_tensor.sum")
            out += list(f.times)
            continue
        out += list(f.metrics)
    return list(dict.fromkeys(m for m in out if m != DURATION))


# ---------------------------------------------------------------------------------------------
# Documentation, generated from the table (docs/readme/formulas.md holds this between markers).

# The counter families that carry a roofline's bytes and FLOPs, by metric-name prefix (any unit, any
# ncu version's spelling): what decides whether an export "has roofline counters".
_BYTES_PATTERN = re.compile(
    r"^(dram__bytes|dram__sectors|lts__t_bytes|lts__t_sectors|l1tex__t_bytes|l1tex__t_sectors|"
    r"derived__lts__lts2xbar|derived__l1tex__lsu_writeback|l1tex__lsu_writeback|lts__lts2xbar)"
)
_FLOPS_PATTERN = re.compile(r"^((sm|smsp)__sass_thread_inst_executed_op_|sm__ops_path_tensor_|derived__sm|"
                            r"sm__inst_executed_pipe_tensor)")


def lacking_roofline_counters(columns: Iterable[object]) -> list[str]:
    """Which of 'byte' and 'FLOP' counters an export's metric columns hold none of ([]: it has both)."""
    cols = [str(c) for c in columns]
    has = {"byte": any(_BYTES_PATTERN.match(c) for c in cols),
           "FLOP": any(_FLOPS_PATTERN.match(c) for c in cols)}
    return [kind for kind, present in has.items() if not present]


def has_roofline_counters(columns: Iterable[object]) -> bool:
    """Whether an export's metric columns hold both byte and FLOP counters of the roofline."""
    return not lacking_roofline_counters(columns)


BEGIN_MARK = "<!-- BEGIN GENERATED: python -m nsroof.counters.metric_formulas -->"
END_MARK = "<!-- END GENERATED -->"

_QUANTITY_TITLES: dict[str, str] = {
    "duration_s": "Duration (s)",
    "flops_fp64": "FP64 FLOPs (CUDA cores)",
    "flops_fp32": "FP32 FLOPs (CUDA cores)",
    "flops_fp16": "FP16 FLOPs (CUDA cores)",
    "flops_tensor": "Tensor-core FLOPs",
    "bytes_dram": "DRAM bytes",
    "bytes_l2": "L2 bytes",
    "bytes_l1": "L1 bytes",
    "peak_flop_per_s_fp64": "FP64 peak (FLOP/s)",
    "peak_flop_per_s_fp32": "FP32 peak (FLOP/s)",
    "peak_flop_per_s_fp16": "FP16 peak (FLOP/s)",
    "peak_flop_per_s_tensor": "Tensor peak (FLOP/s)",
    "bandwidth_bytes_per_s_dram": "DRAM bandwidth (byte/s)",
    "bandwidth_bytes_per_s_l2": "L2 bandwidth (byte/s)",
    "bandwidth_bytes_per_s_l1": "L1 bandwidth (byte/s)",
    "clock_hz_sm": "SM clock (Hz)",
    "clock_hz_dram": "DRAM clock (Hz)",
    "clock_hz_l2": "L2 clock (Hz)",
    "clock_hz_l1": "L1 clock (Hz)",
}

# What a partial counter set gives, applied by nsroof.counters.quantities to every importer's kernel table
# (docs/readme/formulas.md renders this table).
PARTIAL_RULES: tuple[tuple[str, str, str], ...] = (
    ("DRAM read counter without its write twin (`dram__bytes_read.sum`, `dram__bytes_op_read.sum`, "
     "`dram__sectors_read.sum`)", "lower bound",
     "`bytes` at DRAM = the reads; `bytes_source` ends "
     "`(lower bound: DRAM reads only, no write counter collected)`"),
    ("some terms of a CUDA-core precision (e.g. HFMA without HADD/HMUL)", "lower bound",
     "`flops_<precision>` = the terms present; `flops_source` ends `(lower bound: lacks …)`; "
     "`flops_partial`"),
    ("one or two CUDA-core precisions absent (e.g. only FFMA/FADD/FMUL collected)", "lower bound",
     "`flops` = the precisions present; the absent ones' counters are named in `missing`; `flops_partial`"),
    ("no CUDA-core FP counter at all (FP64, FP32, FP16), tensor counter > 0", "lower bound",
     "`flops` = the tensor FLOPs; `flops_source` ends `lower bound: no CUDA-core FP counters collected`"),
    ("no CUDA-core FP counter at all, tensor counter 0 or absent", "NaN",
     "`flops` NaN, `bound` `unknown`, `missing` names the FP counters "
     "(never 0 FLOPs and a 'memory' verdict)"),
    ("tensor work only as `sm__inst_executed_pipe_tensor.sum`", "estimate",
     "FLOPs = instructions × the largest MMA shape of the CC that keeps them within the FP16 tensor roof at "
     "the profiled clock (and within tensor-pipe active cycles × per-cycle peak when collected); "
     "`flops_source` names the shape; above the roof at every shape → `above_roof`, and the source says so"),
    ("a clock absent (neither `*__cycles_elapsed.avg.per_second` nor `*__cycles_elapsed.avg` with a "
     "duration)", "boost clock",
     "datasheet ceilings at the boost clock; `ceiling_source` has no `@ … MHz`"),
    ("no duration counter", "NaN", "every rate and verdict `unknown`; `missing` names the duration metrics"),
)


def _formula_notes(q: str, f: CounterFormula) -> str:
    notes = []
    if f.definition and not q.startswith("bytes_dram") and q != "bandwidth_bytes_per_s_dram":
        notes.append(f"definition `{f.definition}`")
    if f.estimated:
        notes.append("**estimated**")
    if f.lower_bound:
        notes.append("**lower bound**")
    if f.cc_max is not None:
        notes.append(f"CC ≤ {f.cc_max:g}")
    if f.collect:
        notes.append("collected by `nsroof ncu` (" + ", ".join(f.collect) + ")")
    return "; ".join(notes)


def render_markdown() -> str:
    """The formula table as Markdown, one section per quantity, formulas in precedence order."""
    lines = [BEGIN_MARK, ""]
    for q in QUANTITIES:
        lines += [f"### {_QUANTITY_TITLES.get(q, q)} — `{q}`", ""]
        lines += markdown.table(["#", "formula (recorded as provenance)", "notes", "source"],
                                [(i, f"`{f.provenance}`", _formula_notes(q, f), f.source)
                                 for i, f in enumerate(formulas_for(q), 1)])
        lines.append("")
    lines += ["### Tensor metrics per GPU family (`sm__ops_path_tensor_` + …)", ""]
    lines += markdown.table(["family", "CC", "aggregate", "per instruction class"],
                            [(fam, ", ".join(spec["cc"]), ", ".join(f"`{p}`" for p in spec["aggregate"]),
                              ", ".join(f"`{p}`" for p in spec["per_class"]) or "—")
                             for fam, spec in tensor_families().items()])
    lines += ["", "### FLOPs per tensor-pipe instruction (estimate only; largest shape first)", ""]
    lines += markdown.table(["CC", "shapes (FLOP/instruction)"],
                            [(cc, ", ".join(f"{name} {v:g}" for name, v in shapes))
                             for cc, shapes in tensor_shapes_by_cc().items()])
    lines += ["", "### Partial counter sets (the same rule for every importer)", ""]
    lines += markdown.table(["what the export lacks", "gives", "how the report shows it"], PARTIAL_RULES)
    lines += ["", END_MARK]
    return "\n".join(lines) + "\n"


def splice_markdown(document: str) -> str:
    """`document` with the generated block replaced by the current render_markdown()."""
    start, end = document.find(BEGIN_MARK), document.find(END_MARK)
    if start < 0 or end < 0:
        raise ValueError("document lacks the generated-block markers")
    rest = document[end + len(END_MARK):].removeprefix("\n")
    return document[:start] + render_markdown() + rest


if __name__ == "__main__":
    import sys
    from pathlib import Path

    target = Path(sys.argv[1]) if len(sys.argv) > 1 else None
    if target is None:
        sys.stdout.write(render_markdown())
    else:
        from nsroof.atomic import atomic_write_text

        atomic_write_text(target, splice_markdown(target.read_text(encoding="utf-8")))
