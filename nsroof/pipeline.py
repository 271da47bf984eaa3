"""The pipeline: each input once down the stages, read -> counters -> costs -> roofs -> report.

    report = nsroof.analyze(["run.ncu-rep.csv"], machine="a100-40gb")
    report.frame          # one row per (kernel, level), nsroof.schema.COLUMNS
    report.ops            # traces: the op-level view, one row per op call (same columns, kind 'op')
    report.metadata       # what the Parquet file's metadata will hold
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from concurrent.futures import Future
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from nsroof.roofs import machines
from nsroof.roofs.machines import Machine
from nsroof.schema import COLUMNS, Hint


@dataclass
class Report:
    frame: pd.DataFrame
    metadata: dict[str, Any] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)
    hints: list[str] = field(default_factory=list)
    # the op-level view: one row per op call (kind 'op', level dram), written beside the report
    ops: pd.DataFrame = field(default_factory=lambda: pd.DataFrame(columns=COLUMNS))
    # the chrome trace a live profile saved (nsroof.profile: a temporary folder unless trace= named one)
    trace: Path | None = None

    def write(self, path: str | os.PathLike[str]) -> Path:
        """The report file, and the op-level rows (when the inputs have ops) at ops_path(path): both written
        before either replaces what was there."""
        from nsroof.report import parquet

        out = Path(path)
        parquet.write_files([(self.frame, out), *([(self.ops, ops_path(out))] if len(self.ops) else [])],
                            self.metadata)
        return out

    def __repr__(self) -> str:
        """One line (the rows are in .frame): 'Report(15 kernels, 45 rows, from x.csv on NVIDIA A100…)'."""
        from nsroof.schema import kernel_key

        f = self.frame
        n = int(kernel_key(f).nunique()) if len(f) and {"source", "kernel_id"} <= set(f.columns) else 0
        sources = sorted({str(s) for s in f["source"].astype(str).unique()}) if "source" in f.columns else []
        devices = (sorted({str(d) for d in f["device"].astype(str).unique() if d}) if "device" in f.columns
                   else [])
        where = (f" from {', '.join(sources[:2])}{' …' if len(sources) > 2 else ''}" if sources else "") + (
            f" on {', '.join(devices[:2])}{' …' if len(devices) > 2 else ''}" if devices else "")
        notes = f", {len(self.warnings)} warning(s)" if self.warnings else ""
        from nsroof.schema import cpu_ops_only

        noun = "op" if cpu_ops_only(f) else "kernel"  # a CPU profile's rows are op calls, not kernels
        trace = f", trace {self.trace}" if self.trace is not None else ""
        return (f"Report({n} {noun}{'s' if n != 1 else ''}, {len(f)} rows{where}{notes}{trace}; "
                ".frame holds the rows)")


def ops_path(path: str | os.PathLike[str]) -> Path:
    """run.nsroof.parquet -> run.nsroof.ops.parquet: the op-level rows beside the kernel report."""
    p = Path(path)
    return p.with_name(f"{p.name.removesuffix('.parquet')}.ops.parquet")


@dataclass
class _Input:
    """One input analyzed: its report rows, op-level rows and what the metadata says of it."""

    frame: pd.DataFrame
    ops: pd.DataFrame | None  # None: the format has no ops
    record: dict[str, Any]
    warnings: list[str]
    hints: list[str]
    overridden: bool


def analyze(
    paths: Sequence[str | os.PathLike[str]] | str | os.PathLike[str],
    *,
    machine: str | os.PathLike[str] | Machine | None = None,
    aggregate: bool = False,
    ledger: str | os.PathLike[str] | None = None,
    digests: Mapping[str, Future[str]] | None = None,
    captures: Sequence[str | os.PathLike[str]] = (),
) -> Report:
    """Read each export, derive its roofline quantities and classify every kernel at every level.
    `digests`: the inputs' SHA-256 already under way (nsroof.digest.start), by os.fspath(path).
    `captures`: traces recorded around the capture of the CUDA/HIP graphs a trace replays
    (nsroof.importers.trace.graphs)."""
    from nsroof import digest
    from nsroof.report import parquet
    from nsroof.roofs import ceilings

    if isinstance(paths, (str, os.PathLike)):
        paths = [paths]
    fixed = machines.resolve(machine)
    # the inputs' digests (provenance), hashed on a thread while they are parsed (hashlib releases the
    # GIL); the CLI starts them before its imports and hands them over
    given = dict(digests or {})
    digests = {**digest.start(p for p in paths if os.fspath(p) not in given), **given}
    done = [_analyze_one(path, fixed, aggregate, captures) for path in paths]
    frame = _concat([d.frame for d in done])
    warnings = [w for d in done for w in d.warnings]
    if ledger is not None:
        from nsroof.roofs import ledger_join

        frame = ledger_join.apply(frame, ledger_join.load_mapping(ledger), machine=fixed)
        warnings += list((frame.attrs.get("ledger") or {}).get("warnings", []))
    inputs: list[Any] = [{"name": Path(p).name, "path": os.fspath(p),
                          "sha256": digests[os.fspath(p)].result(),
                          **d.record} for p, d in zip(paths, done, strict=True)]
    hints = [h for d in done for h in d.hints]
    metadata = parquet.build_metadata(
        inputs=inputs,
        machines=ceilings.machines_used(frame["device"].dropna().astype(str).unique().tolist(), fixed),
        extra={"aggregate": aggregate, "warnings": warnings, "hints": hints,
               "ledger": os.fspath(ledger) if ledger else None,
               "machine": fixed.label if fixed is not None else None,
               "machine_overrides": [Path(p).name for p, d in zip(paths, done, strict=True) if d.overridden]},
    )
    return Report(frame=frame, metadata=metadata, warnings=warnings, hints=hints,
                  ops=_concat([d.ops for d in done if d.ops is not None]))


def _analyze_one(path: str | os.PathLike[str], fixed: Machine | None, aggregate: bool,
                 captures: Sequence[str | os.PathLike[str]] = ()) -> _Input:
    """One input down the stages once: read (importers) -> counters and costs (costing) ->
    roofs (classify, missing)."""
    from nsroof import importers
    from nsroof.costs import costing
    from nsroof.roofs import ceilings, classify, gpu_identity, missing
    from nsroof.roofs.aggregate import aggregate as merge_launches

    kernels, facts = importers.read(path, captures=captures)
    name = Path(path).name
    # a GPU its printed name does not resolve: identified from its recorded properties or kernel names
    kernels, identity = gpu_identity.label_devices(kernels, facts.extra)
    facts.warnings = [*facts.warnings, *identity]
    if "source" not in kernels or kernels["source"].eq("").all():
        kernels["source"] = name
    with _collector_paused(facts.format):
        tf32 = facts.extra.get("tf32") or {}
        c = costing.costed(kernels, facts.ops, tf32=(tf32.get("matmul_allowed"), tf32.get("cudnn_allowed")))
        op_phases = _op_phases(facts.ops)
        # the costed tables hold what the report needs: the input's go (a trace's ops table has a row per
        # op call, millions in a long run)
        facts.ops = None
        del kernels
        if tf32:
            tf32["rows"] = c.facts.get("tf32_rows", 0)
        # the format; what compare needs to tell two ncu versions apart (the CSV/text layout, the .ncu-rep
        # file version); format-specific facts (a trace's step window, TF32)
        versions = (("layout", facts.layout), ("report_file_version", facts.extra.get("report_file_version")))
        record = ({"format": facts.format} | {k: str(v) for k, v in versions if v not in (None, "")}
                  | ({"facts": dict(facts.extra)} if facts.extra else {}))
        warnings = [f"{name}: {w}" for w in [*facts.warnings, *c.warnings]]
        kernels, quantities = (merge_launches(c.kernels, c.quantities) if aggregate
                               else (c.kernels, c.quantities))
        levels = facts.levels or classify.LEVELS
        if fixed is not None:
            devices = kernels["device"].astype(str).unique() if "device" in kernels else []
            # ncu exports are GPU kernels; a torch trace is when it has GPU rows (a ROCm trace's device may
            # be unnamed or 'AMD Radeon Graphics')
            gpu = facts.format != "torch-trace" or bool(
                "kind" in kernels and kernels["kind"].isin(gpu_identity.GPU_KINDS).any())
            warnings += [f"{name}: {w}"
                         for w in machines.check_against_export(fixed, devices, gpu_export=gpu)]
        built = classify.build_report(kernels, quantities, fixed, levels=levels)
        ops = (classify.build_report(c.op_kernels, c.op_quantities, fixed, levels=("dram",))
               if len(c.op_kernels) else None)
        if ops is not None and op_phases is not None:
            ops["phase"] = (op_phases.reindex(ops["kernel_id"].astype("Int64")).fillna("")
                            .to_numpy(dtype=object))
    hints: list[str] = [Hint(h, source=name) for h in facts.hints]
    hints += [h.at(name) if isinstance(h, Hint) else Hint(h, source=name)
              for h in (missing.completing_metrics_hint(built), missing.ceilings_hint(built)) if h]
    return _Input(built, ops, record, warnings, hints,
                  fixed is not None and ceilings.has_ncu_ceilings(quantities))


def _op_phases(ops: pd.DataFrame | None) -> pd.Series | None:
    """Each op call's phase (nsroof.costs.phases) by op_id, walked over every call of the ops table (the
    op-level view's rows are the costed ops, the embedding lookups that tell the passes apart among the
    others); None when the run is no generation run."""
    if ops is None or not len(ops):
        return None
    from nsroof.costs.phases import EMBEDDING_OPS, phases

    names = ops["name"].astype(str).to_numpy(dtype=object)
    # the shapes phases() reads: the embedding lookups' (their query length)
    shapes = np.full(len(ops), "", dtype=object)
    lookups = np.flatnonzero(np.isin(names, list(EMBEDDING_OPS)))
    shapes[lookups] = [json.dumps(s) if isinstance(s, list) else "" for s in
                       ops["input_shapes"].to_numpy(dtype=object)[lookups].tolist()]
    found = phases(names, shapes,
                   ops["nvtx_path"].fillna("").astype(str).to_numpy(dtype=object),
                   ops["start_us"].astype("float64").to_numpy())
    if not (found != "").any():
        return None
    return pd.Series(found, index=pd.Index(ops["op_id"].astype("Int64")), dtype=object)


def _collector_paused(fmt: str) -> AbstractContextManager[None]:
    """The cyclic collector paused over a trace's analysis: its ops table holds ~a million small lists
    (shapes, dtypes, values) that every full pass walks and none of which is garbage (1.4 s of a 140 MB
    trace's 9 s)."""
    if fmt not in ("torch-trace", "nsys"):  # an nsys export's ops table is a trace's
        return nullcontext()
    from nsroof.importers.trace.load import paused_gc

    return paused_gc()


def _concat(frames: list[pd.DataFrame]) -> pd.DataFrame:
    frames = [f for f in frames if len(f)] or frames[:1]
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=COLUMNS)


def default_output(path: str | os.PathLike[str]) -> Path:
    """report.ncu-rep.csv -> report.nsroof.parquet, next to the input."""
    p = Path(path)
    name = p.name
    for suffix in (".gz", ".csv", ".txt", ".log", ".json", ".ncu-rep", ".pt.trace", ".sqlite", ".nsys-rep",
                   ".qdrep"):
        if name.endswith(suffix) and len(name) > len(suffix):
            name = name[: -len(suffix)]
    return p.with_name(f"{name}.nsroof.parquet")
