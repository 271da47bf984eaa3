"""Which files the inputs name: files named explicitly, glob patterns, and folders recursed, where
exports are picked by content (nsroof.importers.sniff, strict) rather than by name.

A file named like an export (.ncu-rep, .csv, .json, .txt, each also .gz) is never dropped in silence:
if its start cannot be judged (truncated gzip, no .ncu-rep magic, empty) it is analyzed and fails
with the reader's error, otherwise it is listed as skipped, with the reason.
"""

from __future__ import annotations

import glob
import gzip
import os
import zlib
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from nsroof.errors import InputError

_SKIP_DIRS = {".git", "__pycache__", ".venv", "node_modules"}
# A file named like this is never dropped in silence: taken when its content is ours or cannot be
# judged (truncated gzip, no .ncu-rep magic, empty), listed as skipped otherwise.
EXPORT_SUFFIXES: tuple[str, ...] = (".ncu-rep", ".csv", ".json", ".txt")


@dataclass(frozen=True)
class Failure:
    input: str
    error: str


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


def export_named(path: Path) -> bool:
    return path.name.lower().removesuffix(".gz").endswith(EXPORT_SUFFIXES)


def damage(path: Path) -> str | None:
    """Why the start of a file cannot be judged by content (so the reader must judge it); None when it can."""
    if not path.is_file():
        return "not a regular file"
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
    from nsroof.importers import sniff

    if path.name.lower().endswith(".parquet"):
        return None  # our own outputs (or anyone's): never an input
    try:
        sniff(path, strict=True)
        return True
    except InputError as exc:
        why = exc.cause
    if not export_named(path):
        return None
    if damage(path) is not None:
        return True  # a damaged export fails in the reader, with its cause, and fails the run
    return Skipped(os.fspath(path), f"not an ncu CSV, ncu text page, .ncu-rep or torch trace ({why}); "
                                    "name it explicitly to analyze it anyway")


def discover(inputs: Iterable[str | os.PathLike[str]]) -> Discovery:
    """The de-duplicated input files in a stable order, the specs that matched nothing, and the
    export-named files in folders that were skipped (and why)."""
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
            elif isinstance(verdict, Skipped) and absolute(f) not in seen_skipped:
                seen_skipped.add(absolute(f))
                skipped.append(verdict)
        return taken

    def add(p: Path) -> None:
        key = absolute(p)  # the same file named twice; two links to one export stay two inputs
        if key not in seen:
            seen.add(key)
            files.append(p)

    for spec in inputs:
        text = os.fspath(spec)
        p = Path(text)
        if p.is_dir():
            found = scan(p)
            if not found:
                failures.append(Failure(text,
                                        "folder holds no ncu CSV, ncu text page, .ncu-rep or torch trace"))
            for f in found:
                add(f)
        elif p.exists():
            add(p)
        elif any(c in text for c in "*?["):
            found = []
            for m in map(Path, sorted(glob.glob(text, recursive=True))):
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
    taken = {absolute(f) for f in files}
    return Discovery(files, failures, [sk for sk in skipped if absolute(Path(sk.input)) not in taken])


def _walk(root: Path) -> list[Path]:
    out: list[Path] = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if d not in _SKIP_DIRS and not d.startswith("."))
        out += [Path(dirpath) / f for f in sorted(filenames) if not f.startswith(".")]
    return out


def absolute(path: Path) -> Path:
    """Absolute but not resolved: a symlinked export is judged by where it is linked, not where it points."""
    return Path(os.path.normpath(os.path.abspath(path)))
