"""The per-file work: one input analyzed by the pipeline and written as its part file(s), run in a
worker process (or on a Dask worker). The parent only gets a small Outcome back, so its memory does
not grow with the number or size of the inputs."""

from __future__ import annotations

import os
import re
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from nsroof.dataset.discover import absolute
from nsroof.dataset.identity import LOOPBACK_HOSTS, infer_identity, is_under, source_keys
from nsroof.errors import InputError, NsroofError
from nsroof.schema import LINK_LEVEL


@dataclass(frozen=True)
class Task:
    """One input file and everything a worker needs to turn it into its part file(s)."""

    path: str
    source: str
    out_dir: str
    host: str | None = None
    rank: int | None = None
    evidence: tuple[str, ...] = ()
    machine: Any = None  # a name, a profile path, or a Machine (picklable dataclass)
    aggregate: bool = False
    overwrite: bool = False
    # the costing facts of the command, which a worker process does not inherit (a context variable and the
    # formula registry live in the parent): the --model-config (a picklable ModelConfig) and --formulas files
    model: Any = None
    formulas: tuple[str, ...] = ()


def plan(
    files: Sequence[Path],
    out_dir: str | os.PathLike[str],
    *,
    roots: Sequence[Path] = (),
    name_template: str | None = None,
    machine: Any = None,
    aggregate: bool = False,
    overwrite: bool = False,
    model: Any = None,
    formulas: Sequence[str] = (),
) -> list[Task]:
    tasks = []
    for f, source in zip(files, source_keys(files), strict=True):
        root = next((r for r in roots if is_under(absolute(f), absolute(r))), None)
        ident = infer_identity(f, root=root, name_template=name_template)
        tasks.append(Task(path=os.fspath(f), source=source, out_dir=os.fspath(out_dir), host=ident.host,
                          rank=ident.rank, evidence=ident.evidence, machine=machine, aggregate=aggregate,
                          overwrite=overwrite, model=model, formulas=tuple(formulas)))
    return tasks


@dataclass
class Outcome:
    """What a worker sends back: small, whatever the size of the input."""

    input: str
    source: str
    ok: bool
    error: str = ""
    host: list[str | None] = field(default_factory=list)
    rank: int | None = None
    partitions: list[str] = field(default_factory=list)
    kernels: int = 0
    rows: int = 0
    op_rows: int = 0  # rows written to the op-level dataset (ops_dir)
    duration_s: float = 0.0  # kernel time summed over launches
    # the GPUs' busy time: kernels overlapping on streams once (NaN: no start times)
    busy_s: float = float("nan")
    memory_bound_s: float = 0.0  # kernel time whose DRAM row is memory-bound
    compute_bound_s: float = 0.0
    unknown_bound_s: float = 0.0  # no roof or no counters: neither can be claimed
    devices: list[str] = field(default_factory=list)
    ceilings: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    hints: list[str] = field(default_factory=list)  # e.g. the `ncu --metrics` list that completes the file
    top: list[dict[str, Any]] = field(default_factory=list)  # the file's longest kernels (DRAM rows)
    evidence: list[str] = field(default_factory=list)
    wall_s: float = 0.0
    cpu_s: float = 0.0  # CPU time of the analyzing process (all its threads) for this input


def run_task(task: Task) -> Outcome:
    """Analyze one input and write its part file(s). Never raises for bad input: the error becomes
    the outcome, so one broken file never stops the others."""
    t0, c0 = time.perf_counter(), time.process_time()
    out = Outcome(input=task.path, source=task.source, ok=False, rank=task.rank, evidence=list(task.evidence))
    try:
        _run(task, out)
        out.ok = True
    except NsroofError as exc:
        out.error = " ".join(str(exc).split())
    except Exception as exc:  # noqa: BLE001 - a crash in one input must not take the dataset down
        out.error = (f"{task.path}: internal error while analyzing "
                     f"({type(exc).__name__}: {' '.join(str(exc).split())})")
    out.wall_s = time.perf_counter() - t0
    out.cpu_s = time.process_time() - c0
    return out


def _run(task: Task, out: Outcome) -> None:
    import pandas as pd

    from nsroof.costs.ledger.custom import load_file, using_model
    from nsroof.pipeline import analyze
    from nsroof.report import parquet
    from nsroof.report.summary import COPY_KINDS, gpu_busy_s

    for path in task.formulas:  # once per process (load_file remembers)
        load_file(path)
    with using_model(task.model):
        report = analyze([task.path], machine=task.machine, aggregate=task.aggregate)
    frame = _stamped(report.frame, task)
    metadata = dict(report.metadata)
    metadata["dataset"] = {"source": task.source, "rank": task.rank, "evidence": list(task.evidence),
                           "input": task.path}

    # one part per host the file names: its folder says which, the rows say the same
    targets = _parts(frame, task)
    fs, root = parquet.filesystem(task.out_dir)
    ops_fs, ops_root = parquet.filesystem(ops_dir(task.out_dir))
    if not task.overwrite:
        taken = [rel for _, _, rel in targets if parquet.has_part(fs, f"{root}/{rel}")]
        if taken:
            raise InputError(task.path, f"partition {taken[0]} already exists in {task.out_dir}",
                             hint="pass --overwrite to replace it")
    # the op-level rows (a trace's ops) in the sibling dataset DIR.ops, partitioned the same way, written
    # first: an output that cannot be written leaves no kernel part behind for an input said to have failed;
    # a part a former run left there for this input goes when it now has none
    ops = _stamped(report.ops, task) if len(report.ops) else None
    out.op_rows = len(ops) if ops is not None else 0
    rank_source = parquet.partition_dir(None, task.rank, task.source).split("/", 1)[1]
    for _, group, rel in (_parts(ops, task) if ops is not None else []):
        parquet.write_part(ops_fs, ops_root, rel, group.reset_index(drop=True), metadata)
    if ops is None and task.overwrite:
        parquet.drop_parts(ops_fs, ops_root, rank_source)
    try:
        for host, group, rel in targets:
            parquet.write_part(fs, root, rel, group.reset_index(drop=True), metadata)
            out.partitions.append(rel)
            out.host.append(host)
    except Exception:
        if ops is not None:
            parquet.drop_parts(ops_fs, ops_root, rank_source)
        raise

    out.warnings = list(report.warnings)
    out.hints = list(report.hints)
    out.rows = len(frame)
    # one per kernel
    dram = frame[frame["level"].isin(("dram", LINK_LEVEL))] if "level" in frame else frame.iloc[0:0]
    out.kernels = len(dram)
    duration = pd.to_numeric(dram["duration_s"], errors="coerce").fillna(0.0)
    out.duration_s = float(duration.sum())
    out.busy_s = gpu_busy_s(dram[~dram["kind"].astype(str).isin(COPY_KINDS)] if "kind" in dram else dram)
    out.memory_bound_s = float(duration[dram["bound"] == "memory"].sum())
    out.compute_bound_s = float(duration[dram["bound"] == "compute"].sum())
    out.unknown_bound_s = out.duration_s - out.memory_bound_s - out.compute_bound_s
    out.devices = sorted({str(d) for d in frame["device"].dropna() if str(d)})
    # the distinct roof origins (ncu:…, spec:<machine>, measured:<file>, file:<path>) without the
    # per-key detail
    out.ceilings = sorted({m.group(0).strip() for c in frame["ceiling_source"].dropna()
                           for m in re.finditer(r"(?:ncu|spec|measured|file):[^#;=]+", str(c))})
    longest = dram.assign(duration_s=duration).nlargest(5, "duration_s")
    out.top = [
        {"function": str(r.function), "nvtx_path": str(r.nvtx_path), "duration_s": float(r.duration_s),
         "bound": str(r.bound), "source": task.source}
        for r in longest.itertuples()
    ]


def ops_dir(out_dir: str) -> str:
    """ds -> ds.ops: the dataset of op-level rows beside the kernel dataset (as run.ops.parquet is beside a
    run.parquet), outside it so that every reader of DIR still sees one schema."""
    return f"{out_dir.rstrip('/')}.ops"


def _stamped(frame: Any, task: Task) -> Any:
    """The rows with the dataset's source, rank and host: rows without a host of their own take the file's,
    and so do rows whose host is a loopback address (ncu prints 127.0.0.1 for every local run: it names no
    machine)."""
    import pandas as pd

    frame["source"] = task.source
    frame["rank"] = pd.array([task.rank] * len(frame), dtype="Int64")
    hosts = frame["host"].astype(object).where(frame["host"].notna(), "").astype(str)
    if task.host:
        hosts = hosts.mask((hosts == "") | hosts.isin(LOOPBACK_HOSTS), task.host)
    frame["host"] = hosts
    return frame


def _parts(frame: Any, task: Task) -> list[tuple[str | None, Any, str]]:
    """(host, rows, partition folder) per host the rows name."""
    from nsroof.report import parquet

    groups = (list(frame.groupby(frame["host"].to_numpy(), sort=True, dropna=False)) if len(frame)
              else [("", frame)])
    return [(str(h) or None, g, parquet.partition_dir(str(h) or None, task.rank, task.source))
            for h, g in groups]
