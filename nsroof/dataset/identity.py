"""Rank, host and process ID of an input, from evidence only (first hit wins), and each input's
`source` key in the dataset.

  rank  1. ``name_template`` (the ``ncu -o`` template used when profiling): ``%q{RANK}``,
           ``%q{OMPI_COMM_WORLD_RANK}``, ``%q{PMI_RANK}``, ``%q{PMIX_RANK}``, ``%q{SLURM_PROCID}``
        2. a torch trace's ``"distributedInfo": {"rank": N}`` (kineto writes it for torch.distributed jobs)
        3. a ``rank<N>`` / ``rank-<N>`` / ``rank_<N>`` / ``rank=<N>`` token in the file name or a parent
           folder
  host  1. the export's own host column (ncu ``Host Name``), row by row — unless it is a loopback
           address (ncu prints 127.0.0.1 for local runs), which the file-level evidence below replaces
        2. ``%h`` in ``name_template``
        3. torch.profiler's ``tensorboard_trace_handler`` name ``<host>_<pid>.<ns>.pt.trace.json``
        4. a ``host=<name>`` parent folder
Nothing is inferred from process IDs: a file holding several processes keeps ``process_id`` per row.
"""

from __future__ import annotations

import gzip
import os
import re
import urllib.parse
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

from nsroof.dataset.discover import absolute
from nsroof.errors import NsroofError

RANK_ENV_VARS: tuple[str, ...] = ("RANK", "OMPI_COMM_WORLD_RANK", "PMI_RANK", "PMIX_RANK", "SLURM_PROCID",
                                  "MV2_COMM_WORLD_RANK")
LOOPBACK_HOSTS: frozenset[str] = frozenset({"127.0.0.1", "localhost", "::1", "0.0.0.0"})
_RANK_TOKEN = re.compile(r"(?<![A-Za-z0-9])rank[-_=]?(\d+)(?!\d)", re.IGNORECASE)
_TORCH_HANDLER_NAME = re.compile(r"^(?P<host>.+)_(?P<pid>\d+)\.\d+\.pt\.trace\.json(?:\.gz)?$")
_HOST_DIR = re.compile(r"^host=(.+)$")


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
    # the folder the user named counts too (analyze_many(["run/rank3"]) -> rank 3)
    here, top = absolute(path), absolute(root) if root is not None else None
    if top is not None and is_under(here, top):
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


def is_under(path: Path, root: Path) -> bool:
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


def source_keys(files: Sequence[Path]) -> list[str]:
    """The `source` of each input: its file name, or its path relative to the inputs' common folder
    when two inputs share a name (rank0/profile.ncu-rep, rank1/profile.ncu-rep)."""
    names = [f.name for f in files]
    if len(set(names)) == len(names):
        return names
    resolved = [absolute(f) for f in files]
    common = Path(os.path.commonpath([str(r.parent) for r in resolved]))
    dupes = {n for n in names if names.count(n) > 1}
    return [str(PurePosixPath(*r.relative_to(common).parts)) if f.name in dupes else f.name
            for f, r in zip(files, resolved, strict=True)]
