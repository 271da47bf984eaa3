"""One exception family. The CLI turns any NsroofError into one line on stderr and exit code 2."""

from __future__ import annotations

import os


class NsroofError(Exception):
    """Base class for every error nsroof reports to a user."""


class InputError(NsroofError):
    """Bad input: names the file, the line where it applies (when known), the cause and the fix."""

    def __init__(
        self,
        path: str | os.PathLike[str],
        cause: str,
        *,
        line: int | None = None,
        hint: str | None = None,
    ) -> None:
        self.path = os.fspath(path)
        self.line = line
        self.cause = cause
        self.hint = hint
        super().__init__(self.one_line())

    def one_line(self) -> str:
        where = self.path if self.line is None else f"{self.path}:{self.line}"
        text = f"{where}: {self.cause}"
        if self.hint:
            text += f" — {self.hint}"
        return " ".join(text.split())  # never more than one line


class UnitError(InputError):
    """A unit string nsroof does not know; never silently treated as 1.0."""


class MachineError(NsroofError):
    """An unknown machine name or a malformed machine profile."""


class ToolNotFoundError(NsroofError):
    """An external tool (ncu, chromium, ...) is missing; the message says how to get it."""
