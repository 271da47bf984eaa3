"""The dimension each roofline counter must be printed in, from its ncu name.

Nsight Compute names a metric `<unit>__<counter>.<rollup>[.<submetric>]` ("Metrics Structure", ncu's
Kernel Profiling Guide): the counter says what is counted (bytes,
sectors, instructions, cycles, the kernel's duration), the submetric turns it into a rate, a peak per
cycle or a percentage. So the base unit a value must carry (nsroof.units' names) follows from the name
for every counter the roofline formulas read; an importer refuses a value printed in a unit of another
dimension (bytes labelled `usecond`, a duration labelled `Ghz`) instead of converting and using it.
Metrics of other families are not checked (None).

Strict per number, lenient per metric: `is_read(metric)` says whether a roofline number reads the
metric (an input of a formula of nsroof.counters.metric_formulas, a tensor count, a tensor-pipe busy
count). Importers refuse an unknown or wrong unit only on those; any other metric with a unit nsroof
cannot use is dropped with one warning naming it (`ignored_warning`): ncu itself prints
`nvlrx__bytes.sum.per_second` in `byte` on GPUs without NVLink, and no roofline number depends on it.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from functools import lru_cache

from nsroof.counters import metric_formulas as mf
from nsroof.counters import tensor_paths as tp

# counter (the part before the first '.') -> the dimension of one count, in nsroof.units' base names
_COUNTERS: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"^gpu__time_duration$"), "second"),
    (re.compile(r"__bytes(_read|_write)?$|__t_bytes(_\w+)?$|^dram__bytes"), "byte"),
    (re.compile(r"__sectors(_\w+)?$"), "sector"),
    (re.compile(r"__cycles_(elapsed|active)$"), "cycle"),
    (re.compile(r"__(sass_thread_inst_executed|inst_executed)(_\w+)?$"), "inst"),
)


# the roofline chart's derived FP64 counts, e.g. derived__smsp__sass_thread_inst_executed_op_dfma_pred_on_x2
_DERIVED_COUNT = re.compile(r"^derived__\w*sass_thread_inst_executed_op_\w+_pred_on(_x\d+)?$")


# a ratio of cycles: dimensionless (ncu's active cycles per elapsed cycle, a peak's count per cycle)
RATIO = "cycle/cycle"


def counter_dimension(metric: str) -> str | None:
    counter = metric.split(".", 1)[0]
    for pattern, dim in _COUNTERS:
        if pattern.search(counter):
            return dim
    return None


def expected_units(metric: str) -> frozenset[str] | None:
    """The base units (nsroof.units.scale(...).base) a value of `metric` may carry; None: not checked."""
    dim = counter_dimension(metric)
    if dim is None:
        return None
    parts = metric.split(".")
    if len(parts) == 1 and _DERIVED_COUNT.match(metric):
        # ncu's derived instruction counts carry no rollup; .ncu-rep reports print them in `thread`
        return frozenset({"inst", "thread", ""})
    if len(parts) < 2 or parts[1] not in ("sum", "avg", "min", "max"):
        return None
    sub = ".".join(parts[2:])
    if sub == "":
        # a duration of exactly 0 prints without a unit in some exports; counts may print bare
        return frozenset({dim, ""}) if dim != "second" else frozenset({"second"})
    if sub == "per_second":
        return frozenset({"hz"}) if dim == "cycle" else frozenset({f"{dim}/second"})
    if sub.startswith("pct_of_peak"):
        return frozenset({"%"})
    if sub in ("per_cycle_active", "per_cycle_elapsed", "peak_sustained", "peak_sustained_active",
               "peak_sustained_elapsed"):
        # a rate per cycle; `cycle/cycle` is the same ratio with the count left unnamed (a report's
        # IMetric.unit() gives the bare `cycle` of some peaks, which the raw page spells over `cycle`): a
        # dimensionless number per cycle, read as such, never a reason to refuse the file
        return frozenset({f"{dim}/cycle", "", RATIO}) if dim != "cycle" else None
    return None


def check(metric: str, base: str) -> str | None:
    """None when `base` fits `metric`, else why not (one phrase, for an InputError)."""
    allowed = expected_units(metric)
    if allowed is None or base in allowed:
        return None
    want = " or ".join(sorted(repr(u) for u in allowed if u))
    return f"{metric} is printed in {base or 'no unit'!r}, not a unit of its dimension ({want})"


# the tensor counts the quantities read, by suffix (metric_formulas: tensor_ops / tensor_peak)
_TENSOR_SUFFIXES = (".sum", ".sum.per_cycle_elapsed", ".sum.peak_sustained")
_PIPE_TENSOR = ("sm__inst_executed_pipe_tensor.sum", "smsp__inst_executed_pipe_tensor.sum")


@lru_cache(maxsize=1)
def _formula_inputs() -> frozenset[str]:
    names = {m for f in mf.FORMULAS for m in f.metrics if "*" not in m and "<" not in m}
    return frozenset(names | set(tp.TENSOR_ACTIVE_CYCLES) | set(_PIPE_TENSOR))


def is_read(metric: str) -> bool:
    """Whether a roofline number (a formula input, a tensor count or peak) reads `metric`."""
    if metric in _formula_inputs():
        return True
    return metric.startswith(tp.TENSOR_PREFIX) and metric.endswith(_TENSOR_SUFFIXES)


def ignored_warning(ignored: Iterable[tuple[str, str]]) -> str | None:
    """One warning naming the metrics dropped for a unit nsroof cannot use: (metric, printed unit)."""
    pairs = list(dict.fromkeys(ignored))
    if not pairs:
        return None
    shown = ", ".join(f"{m} ({u or 'no unit'!r})" for m, u in pairs[:5])
    more = f" and {len(pairs) - 5} more" if len(pairs) > 5 else ""
    return (f"ignored {len(pairs)} metric(s) printed in a unit of another dimension or an unknown unit: "
            f"{shown}{more}; no roofline number reads them")
