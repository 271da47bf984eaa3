"""The `ncu --metrics` hint once per run: the pipeline says per input file which kernels lack roofline
counters and the metric list that completes them (counters.metric_formulas.required_metrics, ~80 names) as a
structured nsroof.schema.Hint (kind MISSING_COUNTERS, its metrics and kernel count); a run shows that as
one line, and writes the list to a file one can pass to ncu."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from nsroof.schema import MISSING_COUNTERS, Hint


def metrics_list_path(report: Path) -> Path:
    """report.parquet -> report.ncu-metrics.txt, next to it."""
    return report.with_name(report.name.removesuffix(".parquet") + ".ncu-metrics.txt")


def fold_metrics_hints(hints: Sequence[str], list_path: Path) -> list[str]:
    """`hints` with every per-file missing-counters Hint replaced by one line; the union of their metric
    lists (in order) written to `list_path`, comma-separated as `ncu --metrics` takes it."""
    found = [h for h in hints if isinstance(h, Hint) and h.kind == MISSING_COUNTERS]
    if not found:
        return list(hints)
    metrics = list(dict.fromkeys(name for h in found for name in h.metrics))
    from nsroof.atomic import atomic_path

    with atomic_path(list_path) as tmp:
        tmp.write_text(",".join(metrics) + "\n", encoding="utf-8")
    kernels = sum(h.kernels for h in found)
    files = len({h.source for h in found})
    line = Hint(f"{kernels} kernel(s) in {files} file{'s' if files != 1 else ''} lack roofline counters; "
                f"profile with `ncu --metrics $(cat {list_path})` (the {len(metrics)} metrics the roofline "
                f"needs, written to {list_path})", kind=MISSING_COUNTERS, metrics=tuple(metrics),
                kernels=kernels)
    return [*(h for h in hints if h not in found), line]
