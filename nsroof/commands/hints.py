"""The `ncu --metrics` hint once per run: the pipeline says per input file which kernels lack roofline
counters and the metric list that completes them (models.metric_formulas.required_metrics, ~80 names);
a run shows that as one line, and writes the list to a file one can pass to ncu."""

from __future__ import annotations

import re
from pathlib import Path

# pipeline.completing_metrics_hint, prefixed by the input's name (tests keep the two in step)
_METRICS_HINT = re.compile(r"^(?P<source>.+?): (?P<n>\d+) kernel\(s\) lack roofline counters; "
                           r"profile with `ncu --metrics (?P<metrics>[^`]+)`$")


def metrics_list_path(report: Path) -> Path:
    """report.parquet -> report.ncu-metrics.txt, next to it."""
    return report.with_name(report.name.removesuffix(".parquet") + ".ncu-metrics.txt")


def fold_metrics_hints(hints: list[str], list_path: Path) -> list[str]:
    """`hints` with every per-file `ncu --metrics` hint replaced by one line; the union of their metric
    lists (in order) written to `list_path`, comma-separated as `ncu --metrics` takes it."""
    found = [(h, m) for h in hints if (m := _METRICS_HINT.match(h))]
    if not found:
        return list(hints)
    metrics = list(dict.fromkeys(name for _, m in found for name in m["metrics"].split(",")))
    from nsroof.atomic import atomic_path

    with atomic_path(list_path) as tmp:
        tmp.write_text(",".join(metrics) + "\n", encoding="utf-8")
    kernels = sum(int(m["n"]) for _, m in found)
    files = len({m["source"] for _, m in found})
    line = (f"{kernels} kernel(s) in {files} file{'s' if files != 1 else ''} lack roofline counters; profile with "
            f"`ncu --metrics $(cat {list_path})` (the {len(metrics)} metrics the roofline needs, written to {list_path})")
    folded = [h for h in hints if not _METRICS_HINT.match(h)]
    return [*folded, line]
