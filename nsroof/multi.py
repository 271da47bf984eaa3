"""Many exports into one hive-partitioned Parquet dataset (issue 8).

    result = analyze_many(["runs/", "extra/*.ncu-rep"], "dataset/", jobs=2)
    result.exit_code          # 0 when every input landed, 1 when any failed
    nsroof.report.parquet.load("dataset/", filters=[("rank", "=", 0)])

Layout: ``DIR/host=<host>/rank=<rank>/source=<source>/part-0.parquet`` — one complete report file per
(input, host), in the single-file report's schema and metadata, plus ``DIR/_nsroof_dataset.json`` (the
dataset summary; the leading underscore keeps pyarrow and DuckDB globs from reading it as data).
Partition values are percent-encoded (pyarrow's default ``segment_encoding="uri"`` decodes them); an
unknown host or rank is written as ``__HIVE_DEFAULT_PARTITION__`` and reads back as null.

Rank and host come from evidence only, first hit wins:
  rank  1. ``name_template`` (the ``ncu -o`` template used when profiling): ``%q{RANK}``,
           ``%q{OMPI_COMM_WORLD_RANK}``, ``%q{PMI_RANK}``, ``%q{PMIX_RANK}``, ``%q{SLURM_PROCID}``
        2. a torch trace's ``"distributedInfo": {"rank": N}`` (kineto writes it for torch.distributed jobs)
        3. a ``rank<N>`` / ``rank-<N>`` / ``rank_<N>`` / ``rank=<N>`` token in the file name or a parent folder
  host  1. the export's own host column (ncu ``Host Name``), row by row — unless it is a loopback
           address (ncu prints 127.0.0.1 for local runs), which the file-level evidence below replaces
        2. ``%h`` in ``name_template``
        3. torch.profiler's ``tensorboard_trace_handler`` name ``<host>_<pid>.<ns>.pt.trace.json``
        4. a ``host=<name>`` parent folder
Nothing is inferred from process IDs: a file holding several processes keeps ``process_id`` per row.

Inside folders, exports are picked by content; a file named like an export (.ncu-rep, .csv, .json,
.txt, each also .gz) is never dropped in silence: if its start cannot be judged (truncated gzip, no
.ncu-rep magic, empty) it is analyzed and fails with the reader's error, otherwise it is listed as
skipped (``DatasetResult.skipped``, the summary, ``_nsroof_dataset.json``).

Each worker analyzes one file and writes its own partition; the parent only collects small
per-file summaries, so its memory does not grow with the number or size of the inputs.
"""

from __future__ import annotations

import gzip
import json
import os
import re
import sys
import time
import urllib.parse
import zlib
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

from nsroof.errors import InputError, NsroofError

SUMMARY_FILE = "_nsroof_dataset.json"
PART_FILE = "part-0.parquet"
NULL_PARTITION = "__HIVE_DEFAULT_PARTITION__"
PARTITION_KEYS: tuple[str, ...] = ("host", "rank", "source")
RANK_ENV_VARS: tuple[str, ...] = ("RANK", "OMPI_COMM_WORLD_RANK", "PMI_RANK", "PMIX_RANK", "SLURM_PROCID", "MV2_COMM_WORLD_RANK")
_RANK_TOKEN = re.compile(r"(?<![A-Za-z0-9])rank[-_=]?(\d+)(?!\d)", re.IGNORECASE)
_TORCH_HANDLER_NAME = re.compile(r"^(?P<host>.+)_(?P<pid>\d+)\.\d+\.pt\.trace\.json(?:\.gz)?$")
_HOST_DIR = re.compile(r"^host=(.+)$")
_SKIP_DIRS = {".git", "__pycache__", ".venv", "node_modules"}
LOOPBACK_HOSTS: frozenset[str] = frozenset({"127.0.0.1", "localhost", "::1", "0.0.0.0"})


# ---------------------------------------------------------------- input discovery


@dataclass(frozen=True)
class Failure:
    input: str
    error: str


def export_kind(path: Path) -> str | None:
    """Which of our formats a file found while recursing a directory holds, judged by content; None
    for anything else (README, images, Parquet outputs ...). Files named explicitly skip this test:
    they are analyzed and, if unreadable, listed as failed."""
    try:
        with open(path, "rb") as fh:
            head = fh.read(65536)
    except OSError:
        return None
    if head[:4] == b"NVR\0":
        return "ncu-rep"
    if head[:4] == b"PAR1":
        return None
    if head[:2] == b"\x1f\x8b":
        try:
            with gzip.open(path, "rb") as fh:
                head = fh.read(65536)
        except (OSError, EOFError):
            return None
    text = head.lstrip(b"\xef\xbb\xbf").decode("utf-8", errors="replace")
    stripped = text.lstrip()
    # JSON is an object or an array of objects; ncu's text page also opens on '[' ("[18548] app@host")
    if stripped.startswith("{") or (stripped.startswith("[") and stripped[1:].lstrip()[:1] in ("{", "]")):
        return "torch-trace" if re.search(r'"(traceEvents|deviceProperties|schemaVersion)"', text) else None
    if re.search(r'^\s*"?ID"?,', text, re.MULTILINE) or "==PROF==" in text or "==ERROR==" in text:
        return "ncu-csv"
    if re.search(r"^\s*\[\d+\] .+@", text, re.MULTILINE):  # ncu's text (non-CSV) page
        return "ncu-csv"
    return None


@dataclass(frozen=True)
class Skipped:
    """A file found while recursing a folder, named like an export, whose content is none of ours."""

    input: str
    reason: str


@dataclass
class Discovery:
    files: list[Path]
    failures: list[Failure]  # specs that matched nothing
    skipped: list[Skipped]  # export-named files found in folders that hold something else


# A file named like this is never dropped in silence: taken when its content is ours or cannot be
# judged (truncated gzip, no .ncu-rep magic, empty), listed as skipped otherwise.
EXPORT_SUFFIXES: tuple[str, ...] = (".ncu-rep", ".csv", ".json", ".txt")
SKIP_REASON = ("not an ncu CSV, ncu text page, .ncu-rep or torch trace (no ID header, ==PROF== line, "
               "'[N] kernel' line or traceEvents key in its first 64 KiB); name it explicitly to analyze it anyway")


def export_named(path: Path) -> bool:
    return path.name.lower().removesuffix(".gz").endswith(EXPORT_SUFFIXES)


def damage(path: Path) -> str | None:
    """Why the start of a file cannot be judged by content (so the reader must judge it); None when it can."""
    try:
        with open(path, "rb") as fh:
            head = fh.read(65536)
    except OSError as exc:
        return f"cannot be read ({exc.strerror or exc})"
    if not head:
        return "empty file"
    if path.name.lower().endswith(".ncu-rep") and head[:4] != b"NVR\0":
        return "no .ncu-rep magic"
    if path.name.lower().endswith(".gz") and head[:2] != b"\x1f\x8b":
        return "named .gz but not gzip"
    if head[:2] == b"\x1f\x8b":
        try:
            with gzip.open(path, "rb") as fh:
                fh.read(65536)
        except (OSError, EOFError, zlib.error) as exc:
            return f"gzip stream truncated or corrupt ({exc})"
    return None


def scan_file(path: Path) -> Skipped | None | bool:
    """A file met while recursing a folder: True to analyze it, a Skipped to list, None to ignore
    (not named like an export: README, images, Parquet outputs ...)."""
    if export_kind(path) is not None:
        return True
    if not export_named(path):
        return None
    if damage(path) is not None:
        return True  # a damaged export fails in the reader, with its cause, and fails the run
    return Skipped(os.fspath(path), SKIP_REASON)


def expand_inputs(inputs: Iterable[str | os.PathLike[str]]) -> tuple[list[Path], list[Failure]]:
    """Files named explicitly, glob patterns, and directories recursed (exports picked by content).
    Returns the de-duplicated files in a stable order and the specs that matched nothing."""
    found = discover(inputs)
    return found.files, found.failures


def discover(inputs: Iterable[str | os.PathLike[str]]) -> Discovery:
    """expand_inputs, plus the export-named files in folders that were skipped (and why)."""
    import glob

    files: list[Path] = []
    failures: list[Failure] = []
    skipped: list[Skipped] = []
    seen: set[Path] = set()
    seen_skipped: set[Path] = set()

    def scan(root: Path) -> list[Path]:
        taken: list[Path] = []
        for f in _walk(root):
            verdict = scan_file(f)
            if verdict is True:
                taken.append(f)
            elif isinstance(verdict, Skipped) and _absolute(f) not in seen_skipped:
                seen_skipped.add(_absolute(f))
                skipped.append(verdict)
        return taken

    def add(p: Path) -> None:
        key = _absolute(p)  # the same file named twice; two links to one export stay two inputs
        if key not in seen:
            seen.add(key)
            files.append(p)

    for spec in inputs:
        text = os.fspath(spec)
        p = Path(text)
        if p.is_dir():
            found = scan(p)
            if not found:
                failures.append(Failure(text, "directory holds no ncu CSV, .ncu-rep or torch trace"))
            for f in found:
                add(f)
        elif p.exists():
            add(p)
        elif any(c in text for c in "*?["):
            matches = sorted(glob.glob(text, recursive=True))
            found = []
            for m in map(Path, matches):
                if m.is_dir():
                    found += scan(m)
                elif m.is_file():
                    found.append(m)
            if not found:
                failures.append(Failure(text, "pattern matched no file"))
            for f in found:
                add(f)
        else:
            failures.append(Failure(text, "no such file or directory"))
    # a file also named explicitly (or found by a glob) is an input, not skipped
    taken = {_absolute(f) for f in files}
    return Discovery(files, failures, [sk for sk in skipped if _absolute(Path(sk.input)) not in taken])


def _walk(root: Path) -> list[Path]:
    out: list[Path] = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if d not in _SKIP_DIRS and not d.startswith("."))
        out += [Path(dirpath) / f for f in sorted(filenames) if not f.startswith(".")]
    return out


# ---------------------------------------------------------------- rank / host inference


@dataclass(frozen=True)
class Identity:
    host: str | None = None
    rank: int | None = None
    pid: int | None = None
    evidence: tuple[str, ...] = ()


def template_regex(template: str) -> re.Pattern[str]:
    """The `ncu -o` template (%h host, %p process ID, %q{ENV} an environment variable, %i a counter,
    %% a percent sign) as a regex over file names; %q{RANK}-style variables give the rank."""
    out: list[str] = []
    i = 0
    used: set[str] = set()

    def group(name: str, body: str) -> str:
        if name in used:  # a repeated field must repeat its value
            return f"(?P={name})"
        used.add(name)
        return f"(?P<{name}>{body})"

    while i < len(template):
        if template.startswith("%q{", i):
            end = template.find("}", i)
            if end < 0:
                raise NsroofError(f"name template {template!r}: '%q{{' without a closing '}}'")
            var = template[i + 3 : end]
            out.append(group("rank", r"\d+") if var in RANK_ENV_VARS else r".+?")
            i = end + 1
        elif template.startswith("%h", i):
            out.append(group("host", r"[^/]+?"))
            i += 2
        elif template.startswith("%p", i):
            out.append(group("pid", r"\d+"))
            i += 2
        elif template.startswith("%i", i):
            out.append(r"\d+")
            i += 2
        elif template.startswith("%%", i):
            out.append("%")
            i += 2
        else:
            out.append(re.escape(template[i]))
            i += 1
    # the template names the file without ncu's extension (.ncu-rep, .csv, .json.gz ...)
    return re.compile("^" + "".join(out) + r"(?:\.[^/]*)?$")


def infer_identity(path: Path, *, root: Path | None = None, name_template: str | None = None) -> Identity:
    """Rank, host and process ID from the file name, its parent folders and (torch traces) its header."""
    host: str | None = None
    rank: int | None = None
    pid: int | None = None
    evidence: list[str] = []
    name = path.name
    if name_template:
        m = template_regex(os.path.basename(name_template)).match(name)
        if m:
            g = m.groupdict()
            if g.get("rank") is not None:
                rank = int(g["rank"])
                evidence.append(f"rank from name template {name_template!r}")
            if g.get("host"):
                host = g["host"]
                evidence.append(f"host from name template {name_template!r}")
            if g.get("pid"):
                pid = int(g["pid"])
    if rank is None:
        found = _distributed_rank(path)
        if found is not None:
            rank = found
            evidence.append("rank from the trace's distributedInfo")
    # the folder the user named counts too (analyze_many(["run/rank3"]) -> rank 3); absolute but
    # not resolved, so a symlinked export is judged by where it is linked, not where it points
    here, top = _absolute(path), _absolute(root) if root is not None else None
    if top is not None and _is_under(here, top):
        parts = list(here.relative_to(top.parent).parts)
    else:
        parts = list(path.parts[-3:])
    if rank is None:
        for part in reversed(parts):
            m = _RANK_TOKEN.search(part)
            if m:
                rank = int(m.group(1))
                evidence.append(f"rank from name part {part!r}")
                break
    if host is None:
        m = _TORCH_HANDLER_NAME.match(name)
        if m:
            host = m.group("host")
            pid = pid if pid is not None else int(m.group("pid"))
            evidence.append("host from torch.profiler trace-handler name")
    if host is None:
        for part in reversed(parts[:-1]):
            m = _HOST_DIR.match(part)
            if m:
                host = urllib.parse.unquote(m.group(1))
                evidence.append(f"host from folder {part!r}")
                break
    return Identity(host=host, rank=rank, pid=pid, evidence=tuple(evidence))


def _absolute(path: Path) -> Path:
    return Path(os.path.normpath(os.path.abspath(path)))


def _is_under(path: Path, root: Path) -> bool:
    try:
        path.relative_to(root)
        return True
    except ValueError:
        return False


def _distributed_rank(path: Path) -> int | None:
    """kineto writes `"distributedInfo": {"backend": ..., "rank": N, ...}` near the top of a trace."""
    try:
        opener: Any = gzip.open if path.name.endswith(".gz") else open
        with opener(path, "rb") as fh:
            head = fh.read(1 << 20)
    except (OSError, EOFError):
        return None
    m = re.search(rb'"distributedInfo"\s*:\s*\{[^{}]*?"rank"\s*:\s*(\d+)', head)
    return int(m.group(1)) if m else None


# ---------------------------------------------------------------- partition planning


@dataclass(frozen=True)
class Task:
    """One input file and everything a worker needs to turn it into its partition(s)."""

    path: str
    source: str
    out_dir: str
    host: str | None = None
    rank: int | None = None
    evidence: tuple[str, ...] = ()
    machine: Any = None  # a name, a profile path, or a Machine (picklable dataclass)
    aggregate: bool = False
    overwrite: bool = False


def source_keys(files: Sequence[Path]) -> list[str]:
    """The `source` of each input: its file name, or its path relative to the inputs' common folder
    when two inputs share a name (rank0/profile.ncu-rep, rank1/profile.ncu-rep)."""
    names = [f.name for f in files]
    if len(set(names)) == len(names):
        return names
    resolved = [_absolute(f) for f in files]
    common = Path(os.path.commonpath([str(r.parent) for r in resolved]))
    dupes = {n for n in names if names.count(n) > 1}
    return [str(PurePosixPath(*r.relative_to(common).parts)) if f.name in dupes else f.name for f, r in zip(files, resolved, strict=True)]


def encode(value: object) -> str:
    if value is None or (isinstance(value, str) and value == ""):
        return NULL_PARTITION
    return urllib.parse.quote(str(value), safe="")


def partition_dir(host: str | None, rank: int | None, source: str) -> str:
    return f"host={encode(host)}/rank={encode(rank)}/source={encode(source)}"


def partitioning(directory: str | os.PathLike[str] | None = None) -> Any:
    """How pyarrow reads the dataset's folders back: host and source strings, rank int64 (null when
    unknown). A directory laid out by someone else (no top-level host=) falls back to plain hive
    inference."""
    import pyarrow as pa
    import pyarrow.dataset as ds

    if directory is not None and "://" not in os.fspath(directory):
        tops = [e.name for e in os.scandir(directory) if e.is_dir() and not e.name.startswith((".", "_"))]
        if tops and not all(t.startswith("host=") for t in tops):
            return "hive"
    schema = pa.schema([("host", pa.string()), ("rank", pa.int64()), ("source", pa.string())])
    return ds.partitioning(schema, flavor="hive")


def plan(
    files: Sequence[Path],
    out_dir: str | os.PathLike[str],
    *,
    roots: Sequence[Path] = (),
    name_template: str | None = None,
    machine: Any = None,
    aggregate: bool = False,
    overwrite: bool = False,
) -> list[Task]:
    tasks = []
    for f, source in zip(files, source_keys(files), strict=True):
        root = next((r for r in roots if _is_under(_absolute(f), _absolute(r))), None)
        ident = infer_identity(f, root=root, name_template=name_template)
        tasks.append(Task(path=os.fspath(f), source=source, out_dir=os.fspath(out_dir), host=ident.host, rank=ident.rank,
                          evidence=ident.evidence, machine=machine, aggregate=aggregate, overwrite=overwrite))
    return tasks


# ---------------------------------------------------------------- the per-file work (runs in a worker)


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
    duration_s: float = 0.0
    memory_bound_s: float = 0.0  # kernel time whose DRAM row is memory-bound
    compute_bound_s: float = 0.0
    unknown_bound_s: float = 0.0  # no roof or no counters: neither can be claimed
    devices: list[str] = field(default_factory=list)
    ceilings: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    top: list[dict[str, Any]] = field(default_factory=list)  # the file's longest kernels (DRAM rows)
    evidence: list[str] = field(default_factory=list)
    wall_s: float = 0.0
    cpu_s: float = 0.0  # CPU time of the analyzing process (all its threads) for this input


def run_task(task: Task) -> Outcome:
    """Analyze one input and write its partition(s). Never raises for bad input: the error becomes
    the outcome, so one broken file never stops the others."""
    t0, c0 = time.perf_counter(), time.process_time()
    out = Outcome(input=task.path, source=task.source, ok=False, rank=task.rank, evidence=list(task.evidence))
    try:
        _run(task, out)
        out.ok = True
    except NsroofError as exc:
        out.error = " ".join(str(exc).split())
    except Exception as exc:  # noqa: BLE001 - a crash in one input must not take the dataset down
        out.error = f"{task.path}: internal error while analyzing ({type(exc).__name__}: {' '.join(str(exc).split())})"
    out.wall_s = time.perf_counter() - t0
    out.cpu_s = time.process_time() - c0
    return out


def _run(task: Task, out: Outcome) -> None:
    import pandas as pd

    from nsroof.pipeline import analyze

    report = analyze([task.path], machine=task.machine, aggregate=task.aggregate)
    frame = report.frame
    frame["source"] = task.source
    # rows without a host of their own take the file's, and so do rows whose host is a loopback
    # address (ncu prints 127.0.0.1 for every local run: it names no machine); the partition value
    # always equals the column
    hosts = frame["host"].astype(object).where(frame["host"].notna(), "").astype(str)
    if task.host:
        hosts = hosts.mask((hosts == "") | hosts.isin(LOOPBACK_HOSTS), task.host)
    frame["host"] = hosts
    metadata = dict(report.metadata)
    metadata["dataset"] = {"source": task.source, "rank": task.rank, "evidence": list(task.evidence),
                           "input": task.path}

    groups = list(frame.groupby(hosts.to_numpy(), sort=True, dropna=False)) if len(frame) else [("", frame)]
    targets = [(str(h) or None, g, partition_dir(str(h) or None, task.rank, task.source)) for h, g in groups]
    fs, root = filesystem(task.out_dir)
    if not task.overwrite:
        taken = [rel for _, _, rel in targets if _has_parquet(fs, f"{root}/{rel}")]
        if taken:
            raise InputError(task.path, f"partition {taken[0]} already exists in {task.out_dir}",
                             hint="pass --overwrite to replace it")
    for host, group, rel in targets:
        _write_partition(fs, root, rel, group.reset_index(drop=True), metadata)
        out.partitions.append(rel)
        out.host.append(host)

    out.warnings = list(report.warnings)
    out.rows = len(frame)
    dram = frame[frame["level"] == "dram"] if "level" in frame else frame.iloc[0:0]
    out.kernels = len(dram)
    duration = pd.to_numeric(dram["duration_s"], errors="coerce").fillna(0.0)
    out.duration_s = float(duration.sum())
    out.memory_bound_s = float(duration[dram["bound"] == "memory"].sum())
    out.compute_bound_s = float(duration[dram["bound"] == "compute"].sum())
    out.unknown_bound_s = out.duration_s - out.memory_bound_s - out.compute_bound_s
    out.devices = sorted({str(d) for d in frame["device"].dropna() if str(d)})
    # the distinct roof origins (ncu:…, spec:<machine>, measured:<file>, file:<path>) without the per-key detail
    out.ceilings = sorted({m.group(0).strip() for c in frame["ceiling_source"].dropna()
                           for m in re.finditer(r"(?:ncu|spec|measured|file):[^#;=]+", str(c))})
    longest = dram.assign(duration_s=duration).nlargest(5, "duration_s")
    out.top = [
        {"function": str(r.function), "nvtx_path": str(r.nvtx_path), "duration_s": float(r.duration_s),
         "bound": str(r.bound), "source": task.source}
        for r in longest.itertuples()
    ]


def filesystem(out_dir: str) -> tuple[Any, str]:
    """pyarrow filesystem and root path: a local folder, or any URI pyarrow understands (s3://, gs://, file://)."""
    from pyarrow import fs as pafs

    if "://" in out_dir:
        fsys, root = pafs.FileSystem.from_uri(out_dir)
        return fsys, root.rstrip("/")
    return pafs.LocalFileSystem(), os.path.abspath(out_dir).replace(os.sep, "/").rstrip("/")


def _has_parquet(fs: Any, directory: str) -> bool:
    from pyarrow import fs as pafs

    info = fs.get_file_info(directory)
    if info.type != pafs.FileType.Directory:
        return False
    return any(i.path.endswith(".parquet") for i in fs.get_file_info(pafs.FileSelector(directory, recursive=False)))


def _write_partition(fs: Any, root: str, rel: str, frame: Any, metadata: dict[str, Any]) -> None:
    """Write atomically (temporary name in the partition folder, then rename), then drop any stale
    files the partition held before (--overwrite)."""
    import pyarrow.parquet as pq
    from pyarrow import fs as pafs

    from nsroof.report import parquet

    directory = f"{root}/{rel}"
    target = f"{directory}/{PART_FILE}"
    if isinstance(fs, pafs.LocalFileSystem):
        parquet.write(frame, target, metadata=metadata)
    else:
        table = parquet.to_table(frame, metadata)
        fs.create_dir(directory, recursive=True)
        tmp = f"{directory}/.{PART_FILE}.{os.getpid()}.tmp"
        pq.write_table(table, tmp, filesystem=fs, **parquet.write_options(table))
        fs.move(tmp, target)
    for info in fs.get_file_info(pafs.FileSelector(directory, recursive=False)):
        if info.path != target and info.path.endswith(".parquet"):
            fs.delete_file(info.path)


# ---------------------------------------------------------------- executors


@dataclass
class DatasetResult:
    out_dir: str
    outcomes: list[Outcome]
    failures: list[Failure]  # inputs that matched nothing, plus inputs whose analysis failed
    executor: str
    jobs: int
    wall_s: float
    summary_path: str = ""
    skipped: list[Skipped] = field(default_factory=list)  # export-named files that hold none of our formats

    @property
    def ok(self) -> list[Outcome]:
        return [o for o in self.outcomes if o.ok]

    @property
    def exit_code(self) -> int:
        return 1 if self.failures else 0

    def summary(self) -> str:
        return render_summary(self)


ProgressFn = Callable[[Outcome, int, int], None]


def analyze_many(
    inputs: Sequence[str | os.PathLike[str]] | str | os.PathLike[str],
    out_dir: str | os.PathLike[str],
    *,
    jobs: int | None = None,
    executor: str = "local",
    scheduler: Any = None,
    overwrite: bool = False,
    machine: Any = None,
    aggregate: bool = False,
    name_template: str | None = None,
    progress: ProgressFn | bool | None = None,
) -> DatasetResult:
    """Analyze every input into one hive-partitioned dataset at `out_dir`.

    executor "local": a process pool of `jobs` workers (default: the number of cores; 1 runs in
    this process). executor "dask": the same per-file work on the Dask cluster at `scheduler`
    (an address such as tcp://host:8786, or a distributed.Client / LocalCluster)."""
    t0 = time.perf_counter()
    if isinstance(inputs, (str, os.PathLike)):
        inputs = [inputs]
    if executor not in ("local", "dask"):
        raise NsroofError(f"unknown executor {executor!r} — use 'local' or 'dask'")
    if executor == "dask" and scheduler is None:
        raise NsroofError("--executor dask needs --scheduler ADDRESS (e.g. tcp://10.0.0.1:8786)")
    if machine is not None and not _is_machine(machine):
        from nsroof.models import machines as _machines

        machine = _machines.resolve(os.fspath(machine))  # fail fast, once, on a bad --machine
    found = discover(inputs)
    files, failures = found.files, found.failures
    out = os.fspath(out_dir)
    if "://" not in out:
        if Path(out).exists() and not Path(out).is_dir():
            raise InputError(out, "output exists and is not a directory", hint="-o DIR names a dataset folder")
        Path(out).mkdir(parents=True, exist_ok=True)
    roots = [Path(os.fspath(i)) for i in inputs if Path(os.fspath(i)).is_dir()]
    tasks = plan(files, out, roots=roots, name_template=name_template, machine=machine, aggregate=aggregate,
                 overwrite=overwrite)
    n = len(tasks)
    report = _progress_fn(progress)
    outcomes: list[Outcome] = []

    def collect(o: Outcome) -> None:
        outcomes.append(o)
        if report:
            report(o, len(outcomes), n)

    workers = max(1, jobs if jobs is not None else (os.cpu_count() or 1))
    if executor == "dask":
        _run_dask(tasks, scheduler, collect)
    elif workers == 1 or n <= 1:
        for t in tasks:
            collect(run_task(t))
    else:
        _run_pool(tasks, min(workers, n), collect)

    order = {t.path: i for i, t in enumerate(tasks)}
    outcomes.sort(key=lambda o: order[o.input])
    failures = failures + [Failure(o.input, o.error) for o in outcomes if not o.ok]
    result = DatasetResult(out_dir=out, outcomes=outcomes, failures=failures, executor=executor,
                           jobs=workers if executor == "local" else 0, wall_s=time.perf_counter() - t0,
                           skipped=found.skipped)
    result.summary_path = _write_summary(result)
    return result


def _is_machine(obj: Any) -> bool:
    from nsroof.models.machines import Machine

    return isinstance(obj, Machine)


def _run_pool(tasks: Sequence[Task], workers: int, collect: Callable[[Outcome], None]) -> None:
    import multiprocessing as mp
    from concurrent.futures import ProcessPoolExecutor, as_completed

    # forkserver: workers start from a clean single-threaded server, never from a parent that may
    # already run pyarrow/dask threads (fork would copy their locks); the preload makes each start cheap.
    ctx = mp.get_context("forkserver")
    ctx.set_forkserver_preload(["nsroof.multi", "nsroof.pipeline", "pandas", "pyarrow.parquet"])
    with ProcessPoolExecutor(max_workers=workers, mp_context=ctx, initializer=_init_worker) as pool:
        futures = {pool.submit(run_task, t): t for t in tasks}
        for fut in as_completed(futures):
            task = futures[fut]
            try:
                collect(fut.result())
            except Exception as exc:  # noqa: BLE001 - a worker that died (OOM, signal) fails its input only
                collect(Outcome(input=task.path, source=task.source, ok=False,
                                error=f"{task.path}: worker failed ({type(exc).__name__}: {exc})"))


def _init_worker() -> None:
    """Parallelism comes from the processes: one Arrow thread each, or N workers x N CSV threads
    oversubscribe the cores (measured: -j 2 slower than -j 1 on 2 cores before this)."""
    import pyarrow

    pyarrow.set_cpu_count(1)
    pyarrow.set_io_thread_count(1)


def _run_dask(tasks: Sequence[Task], scheduler: Any, collect: Callable[[Outcome], None]) -> None:
    try:
        from distributed import Client, as_completed
    except ImportError:
        from nsroof.errors import ToolNotFoundError

        raise ToolNotFoundError("--executor dask needs dask[distributed]: pip install 'dask[distributed]'") from None
    own = not isinstance(scheduler, Client)
    if own:
        address = getattr(scheduler, "scheduler_address", scheduler)
        try:
            client = Client(address, timeout="20s")
        except (OSError, TimeoutError) as exc:
            raise NsroofError(f"cannot reach the Dask scheduler at {address} ({exc}) — start one with "
                              "`dask scheduler` and workers with `dask worker ADDRESS`") from None
    else:
        client = scheduler
    try:
        futures = client.map(run_task, list(tasks), pure=False, key=[f"nsroof-{i}-{os.path.basename(t.path)}" for i, t in enumerate(tasks)])
        by_key = {f.key: t for f, t in zip(futures, tasks, strict=True)}
        for fut in as_completed(futures):
            try:
                collect(fut.result())
            except Exception as exc:  # noqa: BLE001 - a lost worker fails its input only
                task = by_key[fut.key]
                collect(Outcome(input=task.path, source=task.source, ok=False,
                                error=f"{task.path}: Dask worker failed ({type(exc).__name__}: {exc})"))
    finally:
        if own:
            client.close()


def _progress_fn(progress: ProgressFn | bool | None) -> ProgressFn | None:
    if progress is True:
        def bar(o: Outcome, done: int, total: int) -> None:
            width = 30
            fill = int(width * done / max(total, 1))
            status = "ok" if o.ok else "FAILED"
            sys.stderr.write(f"\r[{'#' * fill}{'.' * (width - fill)}] {done}/{total} {status:6} {os.path.basename(o.input)[:40]:40}")
            if done == total:
                sys.stderr.write("\n")
            sys.stderr.flush()

        return bar
    return progress or None


# ---------------------------------------------------------------- the dataset summary


def _write_summary(result: DatasetResult) -> str:
    """`_nsroof_dataset.json`: one record per input ever written into the dataset (a later run
    updates the records of the inputs it analyzed and keeps the others)."""
    from nsroof._version import __version__
    from nsroof.schema import SCHEMA_VERSION

    fs, root = filesystem(result.out_dir)
    path = f"{root}/{SUMMARY_FILE}"
    previous: dict[str, Any] = {}
    try:
        with fs.open_input_stream(path) as fh:
            previous = json.loads(fh.read().decode("utf-8"))
    except (OSError, FileNotFoundError, ValueError):
        previous = {}
    def key(r: dict[str, Any]) -> str:
        return f"{r.get('source')}|{r.get('rank')}"

    records = {key(r): r for r in previous.get("inputs", []) if isinstance(r, dict) and "source" in r}
    for o in result.outcomes:
        rec = {k: v for k, v in asdict(o).items() if k not in ("top",)}
        old = records.get(key(rec))
        if not o.ok and old and old.get("ok"):
            # a refused or failed re-run leaves the earlier partitions in place: keep their record
            rec = dict(old, last_error=o.error)
        records[key(rec)] = rec
    summary = {
        "nsroof_version": __version__,
        "schema_version": SCHEMA_VERSION,
        "partitioning": list(PARTITION_KEYS),
        "inputs": sorted(records.values(), key=lambda r: (str(r["source"]), str(r.get("rank")))),
        "unmatched": [asdict(f) for f in result.failures if f.input not in {o.input for o in result.outcomes}],
        "skipped": [asdict(sk) for sk in result.skipped],
        "last_run": {"executor": result.executor, "jobs": result.jobs, "wall_s": round(result.wall_s, 3),
                     "inputs": len(result.outcomes), "failed": len(result.failures)},
    }
    text = json.dumps(summary, indent=1, default=str) + "\n"
    if "://" in result.out_dir:
        with fs.open_output_stream(path) as fh:
            fh.write(text.encode("utf-8"))
    else:
        from nsroof.atomic import atomic_write_text

        atomic_write_text(path, text)
    return path


def render_summary(result: DatasetResult) -> str:
    """The dataset-level summary: what landed where, time by bound per host/rank, the longest kernels
    across all inputs, and every failed input with its one-line error."""
    ok = result.ok
    lines = [
        f"dataset {result.out_dir}: {len(ok)} of {len(ok) + len(result.failures)} inputs analyzed"
        f" ({result.executor}{f', -j {result.jobs}' if result.executor == 'local' else ''}, {result.wall_s:.1f} s)",
    ]
    if ok:
        kernels = sum(o.kernels for o in ok)
        rows = sum(o.rows for o in ok)
        parts = sum(len(o.partitions) for o in ok)
        lines.append(f"  {kernels} kernels, {rows} report rows, {parts} partitions (host/rank/source)")
        groups: dict[tuple[str, str], list[Outcome]] = {}
        for o in ok:
            # a file spanning several hosts is one group, named by all of them (never counted twice)
            h = ",".join(x or "?" for x in o.host) or "?"
            groups.setdefault((h, "?" if o.rank is None else str(o.rank)), []).append(o)
        lines.append("")
        lines.append(f"  {'host':<24} {'rank':>5} {'inputs':>6} {'kernels':>8} {'GPU time':>12} {'memory-bound':>13}"
                     f" {'compute-bound':>14} {'unknown':>8}")
        for (h, r), os_ in sorted(groups.items()):
            dur = sum(o.duration_s for o in os_)
            mem = sum(o.memory_bound_s for o in os_)
            comp = sum(o.compute_bound_s for o in os_)
            unk = sum(o.unknown_bound_s for o in os_)
            lines.append(
                f"  {h[:24]:<24} {r:>5} {len(os_):>6} {sum(o.kernels for o in os_):>8} {_fmt_s(dur):>12}"
                f" {_pct(mem, dur):>13} {_pct(comp, dur):>14} {_pct(unk, dur):>8}"
            )
        top = sorted((t for o in ok for t in o.top), key=lambda t: -t["duration_s"])[:5]
        if top:
            lines.append("")
            lines.append("  longest kernels (DRAM level):")
            for t in top:
                where = f" [{t['nvtx_path']}]" if t["nvtx_path"] else ""
                lines.append(f"    {_fmt_s(t['duration_s']):>10}  {t['bound'] or 'unknown':8} {t['function'][:50]}{where}  ({t['source']})")
        unknown = [o.source for o in ok if o.rank is None]
        if unknown:
            lines.append("")
            lines.append(f"  rank unknown for {len(unknown)} input(s) (rank=__HIVE_DEFAULT_PARTITION__, null when read): "
                         "name them with rank<N> or pass --name-template 'prof_%q{RANK}'")
        blind = [o for o in ok if o.duration_s > 0 and o.unknown_bound_s >= o.duration_s]
        if blind:
            lines.append(f"  no kernel could be classified in {len(blind)} input(s) — the 'missing' column names the absent"
                         " counters or roofs; --machine NAME supplies roofs an export lacks")
        warned = sum(len(o.warnings) for o in ok)
        if warned:
            lines.append(f"  {warned} warning(s) recorded in the partitions' metadata")
    if result.failures:
        lines.append("")
        lines.append(f"  FAILED ({len(result.failures)}):")
        for f in result.failures:
            text = f.error if f.error.startswith(f.input) else f"{f.input}: {f.error}"
            lines.append(f"    {text}")
    if result.skipped:
        lines.append("")
        lines.append(f"  skipped ({len(result.skipped)}), named like exports but holding none of nsroof's formats"
                     " (name one explicitly to analyze it anyway):")
        for sk in result.skipped:
            lines.append(f"    {sk.input}")
    lines.append("")
    lines.append(f"  load: nsroof.report.parquet.load({result.out_dir!r}, filters=[('rank', '=', 0)])")
    return "\n".join(lines)


def _fmt_s(seconds: float) -> str:
    if seconds >= 1:
        return f"{seconds:.3f} s"
    if seconds >= 1e-3:
        return f"{seconds * 1e3:.3f} ms"
    return f"{seconds * 1e6:.1f} us"


def _pct(part: float, whole: float) -> str:
    if not whole > 0:
        return "—"
    share = 100 * part / whole
    if 0 < share < 1:
        return "<1 %"
    return ">99 %" if 99 < share < 100 else f"{share:.0f} %"
