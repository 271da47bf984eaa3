"""The dimension each roofline counter must be printed in, from its ncu name.

Nsight Compute names a metric `<unit>__<counter>.<rollup>[.<submetric>]` ("Metrics Structure", ncu's
Kernel Profiling Guide; ../shared/docs/roofline-metrics.md): the counter says what is counted (bytes,
sectors, instructions, cycles, the kernel's duration), the submetric turns it into a rate, a peak per
cycle or a percentage. So the base unit a value must carry (nsroof.units' names) follows from the name
for every counter the roofline formulas read; an importer refuses a value printed in a unit of another
dimension (bytes labelled `usecond`, a duration labelled `Ghz`) instead of converting and using it.
Metrics of other families are not checked (None).
"""

from __future__ import annotations

import re

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
        return frozenset({f"{dim}/cycle", ""}) if dim != "cycle" else None
    return None


def check(metric: str, base: str) -> str | None:
    """None when `base` fits `metric`, else why not (one phrase, for an InputError)."""
    allowed = expected_units(metric)
    if allowed is None or base in allowed:
        return None
    want = " or ".join(sorted(repr(u) for u in allowed if u))
    return f"{metric} is printed in {base or 'no unit'!r}, not a unit of its dimension ({want})"
