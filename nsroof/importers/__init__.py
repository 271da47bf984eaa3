"""Importers: one module per input format, each with one `read(path) -> (kernels, facts)` entry:
the normalized kernel table and what was learned about the file as a whole (both declared in
nsroof.schema: IDENTITY_COLUMNS, FileFacts).

`sniff(path)` is the one file-kind detector; `read(path)` here picks the format with it, by
content, not only by extension.
"""

from __future__ import annotations

import gzip
import importlib
import os
import re
import zlib
from collections.abc import Sequence
from pathlib import Path

import pandas as pd

from nsroof.errors import InputError
from nsroof.schema import FileFacts

# ncu's text output: a `[pid] process@host` line or a `    Section: ...` table, after ==PROF== lines
# and application output; a file with a CSV header stays a CSV export (text never has one)
_CSV_HEADER = re.compile(rb'(?m)^"ID",')
_TEXT_OUTPUT = re.compile(rb"(?m)^(?:\[\d+\] [^\r\n@]*@[^\r\n]*|[ \t]+Section: [^\r\n]*)\r?$")

# positive evidence for a folder scan (sniff(strict=True)): a chrome trace's top-level keys (or, for
# the bare-array form, an event's "ph"); an ncu CSV's header (quoted or not) or ncu's message lines
_TRACE_KEY = re.compile(rb'"(?:traceEvents|deviceProperties|schemaVersion|ph)"\s*:')
_CSV_EVIDENCE = re.compile(rb'(?m)^\s*"?ID"?,|==PROF==|==ERROR==')
NOT_OURS_HINT = "name it explicitly to analyze it anyway"
#: a Parquet file is a table, never an export: an nsroof report is shown, anything else refused
PARQUET_MAGIC = b"PAR1"
PARQUET_HINT = ("an nsroof report is shown by `nsroof analyze REPORT.parquet` and read by nsroof.load(); "
                "analyze the ncu export or torch trace a table came from")

FORMAT_MODULES: dict[str, str] = {
    "ncu-csv": "nsroof.importers.ncu.csv_export",
    "ncu-rep": "nsroof.importers.ncu.rep",
    "ncu-text": "nsroof.importers.ncu.text",
    "torch-trace": "nsroof.importers.trace.kineto",
    "nsys": "nsroof.importers.nsys.sqlite_export",
}
# an Nsight Systems export (an SQLite database: its tables decide) or report (.nsys-rep, .qdrep)
_SQLITE_MAGIC = b"SQLite format 3\x00"
_NSYS_REP_MAGIC = b"NVIDIA Tegra Profiler Report"


# what a damaged gzip stream raises while it is read: a bad header or CRC (BadGzipFile, an OSError), a
# stream cut short (EOFError), corrupt deflate data (zlib.error)
GZIP_ERRORS = (gzip.BadGzipFile, EOFError, zlib.error)


def damaged_gzip(p: Path, exc: BaseException) -> InputError:
    return InputError(p, f"damaged gzip file ({type(exc).__name__}: {exc})",
                      hint="compress it again from the original, or pass the plain file")


def _nsys_tables(p: Path) -> bool:
    """Whether an SQLite database has a table only Nsight Systems exports have (a folder scan's evidence)."""
    import sqlite3
    from contextlib import closing

    try:
        with closing(sqlite3.connect(f"{p.resolve().as_uri()}?mode=ro&immutable=1", uri=True)) as db:
            names = {n for (n,) in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    except sqlite3.Error:
        return False
    return bool(names & {"StringIds", "NVTX_EVENTS", "CUPTI_ACTIVITY_KIND_KERNEL", "TARGET_INFO_GPU"})


def sniff(path: str | os.PathLike[str], *, strict: bool = False) -> str:
    """Return the format name of `path` from its first bytes; raise InputError if it cannot be one of ours.

    A file named explicitly is given to the CSV reader when nothing else matches (its errors say what
    is wrong with it); `strict=True` (a folder being scanned) asks for positive evidence instead — an
    ncu CSV header, ==PROF==/==ERROR== lines, a trace's traceEvents key — and raises otherwise. A Parquet
    file is "parquet" (no importer reads it: `nsroof analyze` shows an nsroof report, read() refuses it)."""
    p = Path(path)
    if not p.exists():
        raise InputError(p, "no such file", hint="check the path")
    if p.is_dir():
        raise InputError(p, "is a directory, not an export",
                         hint="pass an ncu CSV, .ncu-rep or torch trace file")
    if not p.is_file():
        # a pipe (`<(ncu …)`) or a device: the importers read an export more than once, a pipe only once
        raise InputError(p, "not a regular file (a pipe or a device)",
                         hint="save the export to a file first, e.g. "
                              "`ncu -i REPORT --csv --page raw > export.csv`")
    with open(p, "rb") as fh:
        head = fh.read(65536)
    if not head:
        raise InputError(p, "file is empty", line=1,
                         hint="re-export it with `ncu -i REPORT --csv --page raw`")
    if head[:4] == b"NVR\0" or p.name.endswith(".ncu-rep"):
        return "ncu-rep"
    if head.startswith(_NSYS_REP_MAGIC) or p.name.endswith((".nsys-rep", ".qdrep")):
        return "nsys"
    if head.startswith(_SQLITE_MAGIC):
        if strict and not _nsys_tables(p):
            raise InputError(p, "an SQLite database without Nsight Systems tables", hint=NOT_OURS_HINT)
        return "nsys"
    if head[:4] == PARQUET_MAGIC:
        if strict:
            raise InputError(p, "a Parquet file, not an export", hint=NOT_OURS_HINT)
        return "parquet"
    if head[:2] == b"\x1f\x8b":
        try:
            with gzip.open(p, "rb") as fh:
                head = fh.read(65536)
        except (OSError, *GZIP_ERRORS) as exc:
            raise damaged_gzip(p, exc) from None
    text = head.lstrip(b"\xef\xbb\xbf").lstrip()
    # a chrome trace is a JSON object, or a JSON array of event objects; ncu's text output also
    # starts with '[' ("[18548] app@host"), so an array must open on an object
    if text.startswith(b"{") or (text.startswith(b"[") and text[1:].lstrip()[:1] in (b"{", b"]")):
        if strict and not _TRACE_KEY.search(text):
            raise InputError(p, "JSON without a traceEvents, deviceProperties, schemaVersion or ph key in "
                             "its first 64 KiB: not a torch.profiler trace", hint=NOT_OURS_HINT)
        return "torch-trace"
    if _TEXT_OUTPUT.search(head) and not _CSV_HEADER.search(head):
        return "ncu-text"
    if strict and not _CSV_EVIDENCE.search(text):
        raise InputError(p, "no ncu CSV header (ID,…), ==PROF== line or '[N] process@host' line in its "
                         "first 64 KiB", hint=NOT_OURS_HINT)
    return "ncu-csv"


def read(path: str | os.PathLike[str], *,
         captures: Sequence[str | os.PathLike[str]] = ()) -> tuple[pd.DataFrame, FileFacts]:
    """The kernel table and the file facts of `path`, whatever its format (see sniff). `captures`: for a
    torch.profiler trace of CUDA/HIP graph replays, the traces recorded around the graphs' capture."""
    kind = sniff(path)
    if kind == "parquet":
        raise InputError(Path(path), "a Parquet file, not an ncu export or torch trace", hint=PARQUET_HINT)
    module = importlib.import_module(FORMAT_MODULES[kind])
    if captures and kind != "torch-trace":
        raise InputError(Path(path),
                         f"--capture maps graph replays of a torch.profiler trace; this is {kind}",
                         hint="drop --capture, or pass the replay's torch.profiler trace")
    try:
        kernels, facts = module.read(path, captures=captures) if captures else module.read(path)
    except GZIP_ERRORS as exc:
        # a gzip stream that breaks after its first block: decompression errors reach here from whichever
        # reader was streaming it (zlib.error is no OSError)
        raise damaged_gzip(Path(path), exc) from None
    return kernels, facts
