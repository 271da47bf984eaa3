"""benchmarks/run.py: what it passes on of a module's stderr (timings are never checked here:
`make bench`)."""

from __future__ import annotations

import os
import sys

import pytest

from tests._paths import REPO

sys.path.insert(0, str(REPO / "benchmarks"))

import run  # noqa: E402


def test_kineto_noise_is_dropped_and_everything_else_passed_on(capfd: pytest.CaptureFixture[str]) -> None:
    """kineto writes its USDT lines from C++ straight to fd 2; the runner drops those and keeps the module's
    own lines (a traceback included) in order, and returns the module's exit code."""
    script = ("import os\n"
              "os.write(2, b'USDT:2026-12-07 03:29:13 23002:23002 SyncActivityProfilerHandler.cpp:52] "
              "profiler_start\\n')\n"
              "os.write(2, b'a warning of the module\\n')\n"
              "os.write(2, b'USDT:2026-12-07 03:29:13 23002:23002 SyncActivityProfilerHandler.cpp:59] "
              "profiler_stop\\n')\n"
              "raise SystemExit('the module failed')\n")
    rc = run.run_filtered([sys.executable, "-c", script], dict(os.environ))
    err = capfd.readouterr().err
    assert rc == 1
    assert "USDT" not in err
    assert err.splitlines() == ["a warning of the module", "the module failed"]
