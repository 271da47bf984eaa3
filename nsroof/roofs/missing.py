"""What a classified report lacks, and how to complete it: the `ncu --metrics` list for kernels the counters
left unclassified, and the way to give roofs to kernels whose device the machine table does not know. Read
from the report's `missing` texts, once per distinct value."""

from __future__ import annotations

import numpy as np
import pandas as pd

from nsroof.frames.distinct import map_rows
from nsroof.roofs import machines
from nsroof.roofs.gpu_identity import is_amd
from nsroof.schema import MISSING_COUNTERS, Hint


def completing_metrics_hint(report: pd.DataFrame) -> Hint | str:
    """When counters are missing, the `ncu --metrics` list that would complete the roofline
    (from nsroof.counters.metric_formulas, the single source of that list)."""
    # Only rows the missing counters left unclassified: a partial FLOP count (e.g. no HADD/HMUL in a
    # --set full export) still classifies, and needs no re-profiling.
    blocked = report["flops"].isna() | report["bytes"].isna() | report["duration_s"].isna()
    # ncu profiles NVIDIA GPUs only: kernels that ran on an AMD GPU get no `ncu --metrics` advice
    nvidia = ~map_rows(is_amd, report["device"].astype(str).to_numpy(dtype=object)).astype(bool)
    unknown = report[["source", "kernel_id", "missing"]][
        blocked.to_numpy() & nvidia & (report["bound"].to_numpy(dtype=object) == "unknown")]
    lacking = unknown[_contains(unknown["missing"], "__")]
    if lacking.empty:
        return ""
    from nsroof.counters.metric_formulas import required_metrics

    ccs = sorted({str(c) for c in report["cc"].astype(str).unique() if c})
    metrics = required_metrics(ccs[0] if len(ccs) == 1 else None)
    n = lacking.drop_duplicates(["source", "kernel_id"]).shape[0]
    return Hint(f"{n} kernel(s) lack roofline counters; profile with `ncu --metrics {','.join(metrics)}`",
                kind=MISSING_COUNTERS, metrics=tuple(metrics), kernels=n)


def _contains(column: pd.Series, needle: str) -> np.ndarray:
    """Which cells of a text column contain `needle`: tested once per distinct value (a report repeats
    few `missing` texts over thousands of rows)."""
    return map_rows(lambda text: needle in str(text), column.to_numpy(dtype=object)).astype(bool)


def ceilings_hint(report: pd.DataFrame) -> str:
    """When kernels lack roofs because their device is unknown, say how to give them one."""
    no_roof = report[["source", "kernel_id", "device", "missing"]][
        (report["peak_flop_per_s"].isna() | report["bandwidth_bytes_per_s"].isna()).to_numpy()]
    rows = no_roof[_contains(no_roof["missing"], "machine table")]
    if rows.empty:
        return ""
    devices = sorted({str(d) for d in rows["device"].astype(str).unique()})
    n = rows.drop_duplicates(["source", "kernel_id"]).shape[0]
    return (f"{n} kernel(s) have no roofs: {'; '.join(machines.unknown_device(d) for d in devices)}; "
            + machines.UNKNOWN_DEVICE_FIX)


