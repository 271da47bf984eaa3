"""Details-page section labels -> ncu metric names.

On the details page ncu prints section LABELS (`Duration`, `DRAM Frequency`, `Memory Throughput`),
not metric names. A label maps to a metric only where (section, body item, label, base unit) identify
it unambiguously. Each entry below was checked against the same report exported both ways (details
and raw page, base units, of public ncu reports converted by ncu 2024.1: the
label's value equals the metric's value for every kernel), or, for the roofline chart, taken from the
metric list of ncu's SpeedOfLight_RooflineChart section (its sections/*.section file).
Labels that match several metrics (e.g. "Average L1 Active Cycles" = l1tex__ or sm__cycles_active.avg)
are left as labels.

Key: (section, body item label or "" for none, label, base unit after nsroof.units.scale).
"""

from __future__ import annotations

import re

from nsroof.counters import dimensions

_SOL = "GPU Speed Of Light Throughput"
_SOL_OLD = "GPU Speed Of Light"  # ncu <= 2021
_MWA = "Memory Workload Analysis"
_CHART = "GPU Speed Of Light Roofline Chart"

LABELS: dict[tuple[str, str, str, str], str] = {}


def _add(sections: tuple[str, ...], label: str, base: str, metric: str,
         bodies: tuple[str, ...] = ("",)) -> None:
    for section in sections:
        for body in bodies:
            LABELS[(section, body, label, base)] = metric


_both = (_SOL, _SOL_OLD)
_add(_both, "Duration", "second", "gpu__time_duration.sum")
_add(_both, "DRAM Frequency", "hz", "dram__cycles_elapsed.avg.per_second")
_add(_both, "SM Frequency", "hz", "gpc__cycles_elapsed.avg.per_second")
_add(_both, "Elapsed Cycles", "cycle", "gpc__cycles_elapsed.max")
_add(_both, "SM Active Cycles", "cycle", "sm__cycles_active.avg")
_add((_SOL,), "Memory Throughput", "%", "gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed")
_add((_SOL,), "DRAM Throughput", "%", "gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed")
_add((_SOL,), "L1/TEX Cache Throughput", "%", "l1tex__throughput.avg.pct_of_peak_sustained_active")
_add((_SOL,), "L2 Cache Throughput", "%", "lts__throughput.avg.pct_of_peak_sustained_elapsed")
_add((_SOL,), "Compute (SM) Throughput", "%", "sm__throughput.avg.pct_of_peak_sustained_elapsed")
_add((_SOL_OLD,), "SOL L1/TEX Cache", "%", "l1tex__throughput.avg.pct_of_peak_sustained_active")

_add((_MWA,), "Memory Throughput", "byte/second", "dram__bytes.sum.per_second")
_add((_MWA,), "L1/TEX Hit Rate", "%", "l1tex__t_sector_hit_rate.pct")
_add((_MWA,), "L2 Hit Rate", "%", "lts__t_sector_hit_rate.pct")
_add((_MWA,), "Mem Busy", "%", "gpu__compute_memory_access_throughput.avg.pct_of_peak_sustained_elapsed")
_add((_MWA,), "Max Bandwidth", "%",
     "gpu__compute_memory_request_throughput.avg.pct_of_peak_sustained_elapsed")

_LAUNCH = ("Launch Statistics",)
_add(_LAUNCH, "Block Size", "", "launch__block_size")
_add(_LAUNCH, "Grid Size", "", "launch__grid_size")
_add(_LAUNCH, "Registers Per Thread", "register/thread", "launch__registers_per_thread")
_add(_LAUNCH, "Threads", "thread", "launch__thread_count")
_add(_LAUNCH, "Waves Per SM", "", "launch__waves_per_multiprocessor")
_add(_LAUNCH, "Function Cache Configuration", "", "launch__func_cache_config")
_add(_LAUNCH, "Shared Memory Configuration Size", "byte", "launch__shared_mem_config_size")
_add(_LAUNCH, "Dynamic Shared Memory Per Block", "byte/block", "launch__shared_mem_per_block_dynamic")
_add(_LAUNCH, "Static Shared Memory Per Block", "byte/block", "launch__shared_mem_per_block_static")

_OCC = ("Occupancy",)
_add(_OCC, "Achieved Occupancy", "%", "sm__warps_active.avg.pct_of_peak_sustained_active")
_add(_OCC, "Achieved Active Warps Per SM", "warp", "sm__warps_active.avg.per_cycle_active")
_add(_OCC, "Theoretical Occupancy", "%", "sm__maximum_warps_per_active_cycle_pct")
_add(_OCC, "Theoretical Active Warps per SM", "warp", "sm__maximum_warps_avg_per_active_cycle")
_add(_OCC, "Block Limit Registers", "block", "launch__occupancy_limit_registers")
_add(_OCC, "Block Limit Shared Mem", "block", "launch__occupancy_limit_shared_mem")
_add(_OCC, "Block Limit Warps", "block", "launch__occupancy_limit_warps")

_add(("Compute Workload Analysis",), "Executed Ipc Elapsed", "inst/cycle",
     "sm__inst_executed.avg.per_cycle_elapsed")
_add(("Compute Workload Analysis",), "Executed Ipc Active", "inst/cycle",
     "sm__inst_executed.avg.per_cycle_active")
_add(("Compute Workload Analysis",), "Issued Ipc Active", "inst/cycle",
     "sm__inst_issued.avg.per_cycle_active")
_add(("Instruction Statistics",), "Executed Instructions", "inst", "smsp__inst_executed.sum")
_add(("Instruction Statistics",), "Issued Instructions", "inst", "smsp__inst_issued.sum")
_add(("Scheduler Statistics",), "Active Warps Per Scheduler", "warp",
     "smsp__warps_active.avg.per_cycle_active")
_add(("Scheduler Statistics",), "Eligible Warps Per Scheduler", "warp",
     "smsp__warps_eligible.avg.per_cycle_active")

_DIST = ("GPU and Memory Workload Distribution",)
_add(_DIST, "Average DRAM Active Cycles", "cycle", "dram__cycles_active.avg")
_add(_DIST, "Average L2 Active Cycles", "cycle", "lts__cycles_active.avg")
_add(_DIST, "Average SMSP Active Cycles", "cycle", "smsp__cycles_active.avg")
_add(_DIST, "Total DRAM Elapsed Cycles", "cycle", "dram__cycles_elapsed.sum")
_add(_DIST, "Total L2 Elapsed Cycles", "cycle", "lts__cycles_elapsed.sum")
_add(_DIST, "Total SMSP Elapsed Cycles", "cycle", "smsp__cycles_elapsed.sum")

# Roofline chart bodies (single-section export with "Body Item Label"). Peaks use the SM clock,
# achieved values the SMSP clock (SpeedOfLight_RooflineChart.section, roofline-metrics.md §1).
_ROOFS = ("Single Precision Roofline", "Double Precision Roofline")
_ACHIEVED = ("Single Precision Achieved Value", "Double Precision Achieved Value")
_add((_CHART,), "SM Frequency", "hz", "sm__cycles_elapsed.avg.per_second", _ROOFS)
_add((_CHART,), "SM Frequency", "hz", "smsp__cycles_elapsed.avg.per_second", _ACHIEVED)
_add((_CHART,), "DRAM Frequency", "hz", "dram__cycles_elapsed.avg.per_second", _ROOFS + ("",))
_add((_CHART,), "Theoretical DRAM Bytes Accessible", "byte/cycle", "dram__bytes.sum.peak_sustained",
     _ROOFS + ("",))
_add((_CHART,), "DRAM Bandwidth", "byte/second", "dram__bytes.sum.per_second", _ACHIEVED + ("",))
_add((_CHART,), "Theoretical Predicated-On FFMA Operations", "inst",
     "derived__sm__sass_thread_inst_executed_op_ffma_pred_on_x2", ("Single Precision Roofline", ""))
_add((_CHART,), "Theoretical Predicated-On DFMA Operations", "inst",
     "derived__sm__sass_thread_inst_executed_op_dfma_pred_on_x2", ("Double Precision Roofline", ""))
_add((_CHART,), "Theoretical Predicated-On FFMA Thread Instructions Executed", "inst/cycle",
     "sm__sass_thread_inst_executed_op_ffma_pred_on.sum.peak_sustained", ("",))
_add((_CHART,), "Theoretical Predicated-On DFMA Thread Instructions Executed", "inst/cycle",
     "sm__sass_thread_inst_executed_op_dfma_pred_on.sum.peak_sustained", ("",))
_add((_CHART,), "Predicated-On FFMA Operations Per Cycle", "inst",
     "derived__smsp__sass_thread_inst_executed_op_ffma_pred_on_x2", ("Single Precision Achieved Value", ""))
_add((_CHART,), "Predicated-On DFMA Operations Per Cycle", "inst",
     "derived__smsp__sass_thread_inst_executed_op_dfma_pred_on_x2", ("Double Precision Achieved Value", ""))
for _op in ("ffma", "fadd", "fmul", "dfma", "dadd", "dmul"):
    _add((_CHART,), f"Predicated-On {_op.upper()} Thread Instructions Executed Per Cycle", "inst/cycle",
         f"smsp__sass_thread_inst_executed_op_{_op}_pred_on.sum.per_cycle_elapsed", _ACHIEVED + ("",))


def lookup(section: str, body: str, label: str, base_unit: str) -> str | None:
    return LABELS.get((section, body, label, base_unit))


# ---------------------------------------------------------------------------------------------
# Column naming shared by the details-page readers (CSV and text output).

CLI_SECTION = "Command line profiler metrics"  # --metrics: rows carry metric names, not labels
_LABEL_NAME = re.compile(r"\(([A-Za-z0-9_]+__[A-Za-z0-9_.]+)\)\s*$")


def column_name(section: str, body: str, label: str, base_unit: str) -> tuple[str, bool]:
    """(kernel-table column, whether the output printed a metric name rather than a label).

    Metric names (`--metrics`, `--print-metric-name name`, or `label-name`'s `Label (metric)`) are
    kept; labels map through LABELS; any other label becomes `Section: [Body: ]Label`."""
    if section == CLI_SECTION:
        return label.strip(), True
    if "__" in label:
        m = _LABEL_NAME.search(label)
        return (m.group(1) if m else label.strip()), True
    mapped = lookup(section, body, label, base_unit)
    if mapped is not None:
        return mapped, False
    return ": ".join([part for part in (section, body) if part] + [label]), False


def wrong_label_unit(section: str, body: str, label: str, base_unit: str) -> str | None:
    """A label LABELS knows, printed in a unit of none of its dimensions (a damaged or edited file):
    why, in one phrase; None otherwise."""
    bases = sorted({b for (s, bd, lb, b) in LABELS if (s, bd, lb) == (section, body, label)})
    if not bases or base_unit in bases:
        return None
    return (f"{label!r} ({section}) is printed in {base_unit or 'no unit'!r}, "
            f"not {' or '.join(map(repr, bases))}")


def is_read(section: str, body: str, label: str, name: str) -> bool:
    """Whether a roofline number reads this details-page row: its column `name` is a formula input, or
    its label is one LABELS maps to such an input in some unit (so a label printed in a wrong unit is
    refused, not dropped)."""
    if dimensions.is_read(name):
        return True
    return any(dimensions.is_read(m) for (s, bd, lb, _), m in LABELS.items()
               if (s, bd, lb) == (section, body, label))


def disambiguate(names: list[str], base_units: list[str]) -> list[str]:
    """One name printed in two different units (dimensions) becomes two columns, `name [unit]`."""
    counts: dict[str, int] = {}
    for n in names:
        counts[n] = counts.get(n, 0) + 1
    return [f"{n} [{u or '1'}]" if counts[n] > 1 else n for n, u in zip(names, base_units, strict=True)]
