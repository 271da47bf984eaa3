"""Atomic file output: write to a temporary file beside the target, then rename. A failure never
leaves a partial file behind, and the file gets the permissions a plain open() would give it."""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path

from nsroof.errors import InputError


def _default_mode() -> int:
    """0o666 minus the process umask: mkstemp creates 0o600, which would hide reports from everyone else."""
    mask = os.umask(0)
    os.umask(mask)
    return 0o666 & ~mask


def cannot_write(target: Path, exc: OSError) -> InputError:
    """The one-line error of an output that cannot be written (no such folder, no permission, disk full)."""
    return InputError(target, f"cannot write the output ({exc.strerror or exc})",
                      hint="choose another -o path")


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike[str]) -> Iterator[Path]:
    """Yield a temporary path in the target's folder; on success rename it onto `path`.

    An output that cannot be written (no such folder, a file where a folder should be, no permission)
    is an InputError naming the target."""
    target = Path(path)
    try:
        if target.is_dir():
            raise IsADirectoryError(f"{target} is a directory")
        target.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
        os.close(fd)
    except OSError as exc:
        raise cannot_write(target, exc) from None
    tmp_path = Path(tmp)
    try:
        yield tmp_path
        os.chmod(tmp_path, _default_mode())
        os.replace(tmp_path, target)
    except OSError as exc:
        raise cannot_write(target, exc) from None
    finally:
        if tmp_path.exists():
            tmp_path.unlink()


def atomic_write_text(path: str | os.PathLike[str], text: str) -> None:
    with atomic_path(path) as tmp:
        tmp.write_text(text, encoding="utf-8")


def atomic_write_bytes(path: str | os.PathLike[str], data: bytes) -> None:
    with atomic_path(path) as tmp:
        tmp.write_bytes(data)
