"""The spine: input file(s) -> kernel table -> quantities -> classified report.

    report = nsroof.analyze(["run.ncu-rep.csv"], machine="a100-40gb")
    report.frame          # one row per (kernel, level), nsroof.schema.COLUMNS
    report.metadata       # what the Parquet file's metadata will hold
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from nsroof._distinct import map_rows
from nsroof.models.machines import Machine


@dataclass
class Report:
    frame: pd.DataFrame
    metadata: dict[str, Any] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)
    hints: list[str] = field(default_factory=list)

    def write(self, path: str | os.PathLike[str]) -> Path:
        from nsroof.report import parquet

        return parquet.write(self.frame, path, metadata=self.metadata)


def resolve_machine(machine: str | os.PathLike[str] | Machine | None) -> Machine | None:
    if machine is None or isinstance(machine, Machine):
        return machine
    from nsroof.models import machines

    return machines.load(os.fspath(machine))


def analyze(
    paths: Sequence[str | os.PathLike[str]] | str | os.PathLike[str],
    *,
    machine: str | os.PathLike[str] | Machine | None = None,
    aggregate: bool = False,
    ledger: str | os.PathLike[str] | None = None,
    digests: Mapping[str, Future[str]] | None = None,
) -> Report:
    """Read each export, derive its roofline quantities and classify every kernel at every level.
    `digests`: the inputs' SHA-256 already under way (nsroof.digest.start), by os.fspath(path)."""
    from nsroof import digest, importers
    from nsroof.models.quantities import derive
    from nsroof.report import build, parquet
    from nsroof.report.aggregate import aggregate as merge_launches

    if isinstance(paths, (str, os.PathLike)):
        paths = [paths]
    fixed = resolve_machine(machine)
    resolver = build.default_resolver(fixed)
    frames: list[pd.DataFrame] = []
    warnings: list[str] = []
    hints: list[str] = []
    formats: dict[str, str] = {}
    # the inputs' digests (provenance), hashed on a thread while they are parsed (hashlib releases the
    # GIL); the CLI starts them before its imports and hands them over
    given = dict(digests or {})
    digests = {**digest.start(p for p in paths if os.fspath(p) not in given), **given}
    for path in paths:
        kernels, facts = importers.read(path)
        name = Path(path).name
        formats[name] = facts.format
        warnings += [f"{name}: {w}" for w in facts.warnings]
        hints += [f"{name}: {h}" for h in facts.hints]
        if "source" not in kernels or kernels["source"].eq("").all():
            kernels["source"] = name
        quantities = derive(kernels)
        if "analytic_flops" in kernels.columns:  # torch traces: the ops' analytic costs where counters are absent
            from nsroof.importers.torch_trace import apply_analytic

            quantities = apply_analytic(kernels, quantities)
        if aggregate:
            kernels, quantities = merge_launches(kernels, quantities)
        levels = facts.levels or build.LEVELS
        built = build.build_report(kernels, quantities, levels=levels, resolver=resolver)
        for hint in (completing_metrics_hint(built), ceilings_hint(built)):
            if hint:
                hints.append(f"{name}: {hint}")
        frames.append(built)
    frame = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=build.COLUMNS)

    if ledger is not None:
        from nsroof.report import ledger_join

        frame = ledger_join.apply(frame, ledger_join.load_mapping(ledger), machine=fixed)
        warnings += list((frame.attrs.get("ledger") or {}).get("warnings", []))

    used = _machines_used(frame, fixed, resolver)
    metadata = parquet.build_metadata(
        inputs=[{"name": Path(p).name, "path": os.fspath(p), "sha256": digests[os.fspath(p)].result(),
                 "format": formats.get(Path(p).name, "")} for p in paths],
        machines=used,
        extra={"aggregate": aggregate, "warnings": warnings, "hints": hints,
               "ledger": os.fspath(ledger) if ledger else None},
    )
    return Report(frame=frame, metadata=metadata, warnings=warnings, hints=hints)


def completing_metrics_hint(report: pd.DataFrame) -> str:
    """When counters are missing, the `ncu --metrics` list that would complete the roofline
    (from nsroof.models.metric_formulas, the single source of that list)."""
    # Only rows the missing counters left unclassified: a partial FLOP count (e.g. no HADD/HMUL in a
    # --set full export) still classifies, and needs no re-profiling.
    blocked = report["flops"].isna() | report["bytes"].isna() | report["duration_s"].isna()
    unknown = report[["source", "kernel_id", "missing"]][
        blocked.to_numpy() & (report["bound"].to_numpy(dtype=object) == "unknown")]
    lacking = unknown[_contains(unknown["missing"], "__")]
    if lacking.empty:
        return ""
    from nsroof.models.metric_formulas import required_metrics

    ccs = sorted({str(c) for c in report["cc"].astype(str).unique() if c})
    metrics = required_metrics(ccs[0] if len(ccs) == 1 else None)
    n = lacking.drop_duplicates(["source", "kernel_id"]).shape[0]
    return f"{n} kernel(s) lack roofline counters; profile with `ncu --metrics {','.join(metrics)}`"


def _contains(column: pd.Series, needle: str) -> np.ndarray:
    """Which cells of a text column contain `needle`: tested once per distinct value (a report repeats
    few `missing` texts over thousands of rows)."""
    return map_rows(lambda text: needle in str(text), column.to_numpy(dtype=object)).astype(bool)


def ceilings_hint(report: pd.DataFrame) -> str:
    """When kernels lack roofs because their device is unknown, say how to give them one."""
    no_roof = report[["source", "kernel_id", "device", "missing"]][
        (report["peak_flop_per_s"].isna() | report["bandwidth_bytes_per_s"].isna()).to_numpy()]
    rows = no_roof[_contains(no_roof["missing"], "not in the machine table")]
    if rows.empty:
        return ""
    devices = sorted({str(d) or "(unnamed)" for d in rows["device"].astype(str).unique()})
    n = rows.drop_duplicates(["source", "kernel_id"]).shape[0]
    return (f"{n} kernel(s) have no roofs: device {', '.join(repr(d) for d in devices)} is not in the machine "
            "table (the export names no GPU); pass --machine NAME (see `nsroof machines`) or a profile from "
            "`nsroof measure`")


def _machines_used(frame: pd.DataFrame, fixed: Machine | None, resolver: Any) -> list[Machine]:
    if fixed is not None:
        return [fixed]
    seen: dict[str, Machine] = {}
    for device in frame["device"].dropna().astype(str).unique():
        m = resolver(device)
        if m is not None:
            seen[m.name] = m
    return list(seen.values())


def default_output(path: str | os.PathLike[str]) -> Path:
    """report.ncu-rep.csv -> report.nsroof.parquet, next to the input."""
    p = Path(path)
    name = p.name
    for suffix in (".gz", ".csv", ".txt", ".log", ".json", ".ncu-rep", ".pt.trace"):
        if name.endswith(suffix) and len(name) > len(suffix):
            name = name[: -len(suffix)]
    return p.with_name(f"{name}.nsroof.parquet")
