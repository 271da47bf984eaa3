"""Nsight Systems reports (.nsys-rep, .qdrep): exported to SQLite by the `nsys` CLI (`nsys export --type
sqlite`) into a temporary folder, then read as any export. Without `nsys` (on PATH, or NSROOF_NSYS) the one
line says how to export it; a report newer than the local nsys says which version wrote it (its first line:
``NVIDIA Tegra Profiler Report 2025@1@1@110-…``)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from nsroof.errors import InputError

REP_MAGIC = b"NVIDIA Tegra Profiler Report"
NSYS_ENV = "NSROOF_NSYS"
EXPORT_COMMAND = "nsys export --type sqlite -o run.sqlite run.nsys-rep"
_VERSION = re.compile(rb"^NVIDIA Tegra Profiler Report (\d{4})@(\d+)@(\d+)@(\d+)")


def find_nsys() -> str | None:
    """The nsys CLI: NSROOF_NSYS when set to an executable, else `nsys` on PATH (None: neither)."""
    explicit = os.environ.get(NSYS_ENV)
    if explicit and Path(explicit).is_file() and os.access(explicit, os.X_OK):
        return explicit
    return shutil.which("nsys")


def report_version(path: Path) -> str:
    """The nsys version that wrote a report ('2025.1.1.110'), '' where its first line does not say (2022's
    reports write 'Report 1.')."""
    with open(path, "rb") as fh:
        m = _VERSION.match(fh.read(96))
    return ".".join(part.decode() for part in m.groups()) if m else ""


def export_command(nsys: str, report: Path, out: Path) -> list[str]:
    return [nsys, "export", "--type", "sqlite", "--quiet", "true", "--force-overwrite", "true",
            "--output", os.fspath(out), os.fspath(report)]


@contextmanager
def exported(path: Path) -> Iterator[Path]:
    """The SQLite export of a report, in a temporary folder removed afterwards."""
    nsys = find_nsys()
    version = report_version(path)
    wrote = f" (written by nsys {version})" if version else ""
    if nsys is None:
        raise InputError(path, f"an Nsight Systems report{wrote}; reading it needs the `nsys` CLI, which is "
                         "not on PATH", hint=f"export it where nsys is installed: `{EXPORT_COMMAND}`, then "
                         f"`nsroof analyze run.sqlite` (or set {NSYS_ENV} to the nsys binary)")
    with tempfile.TemporaryDirectory(prefix="nsroof-nsys-") as folder:
        out = Path(folder) / (path.name.rsplit(".", 1)[0] + ".sqlite")
        try:
            done = subprocess.run(export_command(nsys, path, out), capture_output=True, text=True,
                                  errors="replace", timeout=3600, check=False)
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise InputError(path, f"`nsys export` could not run ({exc})", hint=EXPORT_COMMAND) from None
        if done.returncode != 0 or not out.is_file():
            said = [line.strip() for line in (done.stderr + "\n" + done.stdout).splitlines() if line.strip()]
            # nsys names the cause on an 'error' line (a newer report: both versions), the advice after it
            last = said[-1] if said else "no output"
            cause = next((line for line in said if "error" in line.lower()), last)
            raise InputError(path, f"`nsys export` failed{wrote}: {cause[:300]}",
                             hint=f"export it with an nsys at least as new as the one that wrote it: "
                                  f"`{EXPORT_COMMAND}`")
        yield out
