"""Running the `nsroof` command from tests, in-process or as a real process."""

from __future__ import annotations

import subprocess
import sys

from tests._paths import REPO


def nsroof_process(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """A real process: exit code and stderr exactly as a user sees them."""
    return subprocess.run([sys.executable, "-m", "nsroof", *args], cwd=REPO, capture_output=True, text=True,
                          timeout=timeout)


def invoke(*args: str) -> tuple[int, str, str]:
    """The same command in-process (click's runner): fast enough for every error case."""
    from click.testing import CliRunner

    from nsroof.cli import cli

    r = CliRunner().invoke(cli, list(args))
    return r.exit_code, r.stdout, r.stderr
