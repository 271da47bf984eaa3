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
from nsroof.models import machines
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
    from nsroof.models import machines
    from nsroof.models.quantities import derive
    from nsroof.report import build, parquet
    from nsroof.report.aggregate import aggregate as merge_launches

    if isinstance(paths, (str, os.PathLike)):
        paths = [paths]
    fixed = machines.resolve(machine)
    resolver = machines.for_devices(fixed)
    frames: list[pd.DataFrame] = []
    warnings: list[str] = []
    hints: list[str] = []
    records: dict[str, dict[str, Any]] = {}  # what the metadata says of each input, by file name
    overrides: list[str] = []  # inputs whose ncu ceilings an explicit --machine replaces
    # the inputs' digests (provenance), hashed on a thread while they are parsed (hashlib releases the
    # GIL); the CLI starts them before its imports and hands them over
    given = dict(digests or {})
    digests = {**digest.start(p for p in paths if os.fspath(p) not in given), **given}
    for path in paths:
        kernels, facts = importers.read(path)
        name = Path(path).name
        # the format; what compare needs to tell two ncu versions apart (the CSV/text layout, the .ncu-rep
        # file version); format-specific facts (a trace's step window, TF32)
        versions = (("layout", facts.layout), ("report_file_version", facts.extra.get("report_file_version")))
        records[name] = ({"format": facts.format} | {k: str(v) for k, v in versions if v not in (None, "")}
                         | ({"facts": dict(facts.extra)} if facts.extra else {}))
        warnings += [f"{name}: {w}" for w in facts.warnings]
        hints += [f"{name}: {h}" for h in facts.hints]
        if "source" not in kernels or kernels["source"].eq("").all():
            kernels["source"] = name
        quantities = fill_analytic(kernels, derive(kernels))
        if aggregate:
            kernels, quantities = merge_launches(kernels, quantities)
        levels = facts.levels or build.LEVELS
        if fixed is not None:
            devices = kernels["device"].astype(str).unique() if "device" in kernels else []
            # ncu exports are GPU kernels; a torch trace is when its rows name a CUDA device
            gpu = facts.format != "torch-trace" or any(machines.device_candidates(d) or "NVIDIA" in d for d in devices)
            warnings += [f"{name}: {w}" for w in machines.check_against_export(fixed, devices, gpu_export=gpu)]
            if build.has_ncu_ceilings(quantities):
                overrides.append(name)
        built = analytic_ledger(build.build_report(kernels, quantities, fixed, levels=levels), quantities)
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
    inputs: list[Any] = [{"name": Path(p).name, "path": os.fspath(p), "sha256": digests[os.fspath(p)].result(),
                          **records[Path(p).name]} for p in paths]
    metadata = parquet.build_metadata(
        inputs=inputs,
        machines=used,
        extra={"aggregate": aggregate, "warnings": warnings, "hints": hints,
               "ledger": os.fspath(ledger) if ledger else None,
               "machine": fixed.label if fixed is not None else None,
               "machine_overrides": overrides},
    )
    return Report(frame=frame, metadata=metadata, warnings=warnings, hints=hints)


def fill_analytic(kernels: pd.DataFrame, quantities: pd.DataFrame) -> pd.DataFrame:
    """The one step that puts analytic costs in: FLOPs and DRAM bytes the counters left NaN come from the
    analytic costs an importer attached to the kernel table (torch traces: ``analytic_*`` columns, the
    launching op's ledger formula), source ``analytic:<formula>``; rows without one keep NaN and get the
    reason in missing. A kernel table with a ``duration_source`` column (CPU op rows) names its own."""
    if "analytic_flops" not in kernels.columns:
        return quantities
    from nsroof.schema import PRECISIONS

    q = quantities.copy()
    af = kernels["analytic_flops"].astype("float64").to_numpy()
    ab = kernels["analytic_bytes"].astype("float64").to_numpy()
    prec = kernels["analytic_precision"].astype(str).to_numpy()
    label = kernels["analytic_label"].astype(str).to_numpy()
    formula = kernels["analytic_formula"].astype(str).to_numpy()
    why = kernels["analytic_missing"].astype(str).to_numpy()
    take_f = q["flops"].isna().to_numpy() & ~np.isnan(af)
    for p in PRECISIONS:
        values = q[f"flops_{p}"].astype("float64").to_numpy().copy()
        values[take_f] = np.where(prec[take_f] == p, af[take_f], 0.0)
        q[f"flops_{p}"] = values
    q.loc[take_f, "flops"] = af[take_f]
    q.loc[take_f, "flops_source"] = ["analytic:" + s for s in label[take_f]]
    q.loc[take_f, "missing_flops"] = ""
    dtypes = np.full(len(q), "", dtype=object)
    dtypes[take_f] = kernels["analytic_tensor_dtype"].astype(str).to_numpy()[take_f]
    q["tensor_dtype"] = dtypes
    take_b = q["bytes_dram"].isna().to_numpy() & ~np.isnan(ab)
    q.loc[take_b, "bytes_dram"] = ab[take_b]
    q.loc[take_b, "bytes_source_dram"] = ["analytic:" + s for s in formula[take_b]]
    q.loc[take_b, "missing_dram"] = ""
    still = q["flops"].isna().to_numpy() & (why != "")
    q.loc[still, "missing_flops"] = why[still]
    still_b = q["bytes_dram"].isna().to_numpy() & (why != "")
    q.loc[still_b, "missing_dram"] = why[still_b]
    if "duration_source" in kernels.columns:
        own = kernels["duration_source"].astype(str).to_numpy()
        q["duration_source"] = np.where(own != "", own, q["duration_source"].astype(str).to_numpy())
    q["ledger_label"] = np.where(take_f, label, "")
    return q


def analytic_ledger(report: pd.DataFrame, quantities: pd.DataFrame) -> pd.DataFrame:
    """For rows costed by an analytic formula, the ledger side of the report: the formula (ledger_op), the
    FLOPs and compulsory bytes it says (expected_flops, min_bytes), the ideal time against the roofs
    (ideal_time_s = the dram row's time floor) and headroom = duration_s / ideal_time_s."""
    if "ledger_label" not in quantities.columns or report.empty:
        return report
    labels = quantities["ledger_label"].astype(str).to_numpy()
    if len(report) % max(len(labels), 1):
        return report
    label = np.repeat(labels, len(report) // max(len(labels), 1))  # the report is kernel-major
    costed = (label != "") & (report["level"].astype(str).to_numpy() == "dram")
    if not costed.any():
        return report
    out = report.copy()
    out["ledger_op"] = np.where(costed, label, out["ledger_op"].astype(object).where(out["ledger_op"].notna(), ""))
    for column, value in (("expected_flops", "flops"), ("min_bytes", "bytes"), ("ideal_time_s", "time_floor_s")):
        out[column] = np.where(costed, out[value].astype("float64"), out[column].astype("float64"))
    ideal = out["ideal_time_s"].to_numpy(dtype="float64")
    with np.errstate(divide="ignore", invalid="ignore"):
        headroom = np.where(costed & (ideal > 0), out["duration_s"].to_numpy(dtype="float64") / ideal, np.nan)
    out["headroom"] = np.where(costed, headroom, out["headroom"].astype("float64"))
    return out


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
    rows = no_roof[_contains(no_roof["missing"], "machine table")]
    if rows.empty:
        return ""
    devices = sorted({str(d) for d in rows["device"].astype(str).unique()})
    n = rows.drop_duplicates(["source", "kernel_id"]).shape[0]
    return (f"{n} kernel(s) have no roofs: {'; '.join(machines.unknown_device(d) for d in devices)}; "
            + machines.UNKNOWN_DEVICE_FIX)


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
