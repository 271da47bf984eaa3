"""A fresh clone needs two commands: `make demo` and `make test` each set up the environment when it is
missing or older than pyproject.toml / setup.py, and CI runs exactly the README's commands and fails
when they fail (pytest's exit code 5, no test collected, included)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.skipif(shutil.which("make") is None, reason="needs GNU make")


@pytest.fixture()
def clone(repo: Path, tmp_path: Path) -> Path:
    """The Makefile and the two files the environment depends on, without running anything."""
    shutil.copy(repo / "Makefile", tmp_path / "Makefile")
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'x'\n")
    (tmp_path / "setup.py").write_text("")
    return tmp_path


# run as a make of its own even when the suite itself runs under `make test`
ENV = {k: v for k, v in os.environ.items() if k not in ("MAKEFLAGS", "MFLAGS", "MAKELEVEL", "MAKEOVERRIDES")}


def dry(clone: Path, target: str) -> list[str]:
    out = subprocess.run(["make", "--no-print-directory", "-n", target], cwd=clone, capture_output=True,
                         text=True, check=True, env=ENV).stdout
    return [line for line in out.splitlines() if line.strip()]


def _stamp(clone: Path, newer_than_sources: bool) -> None:
    stamp = clone / ".venv" / ".stamp"
    stamp.parent.mkdir(exist_ok=True)
    stamp.touch()
    t = os.stat(clone / "pyproject.toml").st_mtime
    os.utime(stamp, (t + 10, t + 10) if newer_than_sources else (t - 10, t - 10))


@pytest.mark.parametrize(("target", "command"), [("test", "-m pytest -q -n auto --dist loadfile"),
                                                 ("demo", "-m nsroof demo")])
def test_demo_and_test_set_up_a_missing_environment(clone: Path, target: str, command: str) -> None:
    lines = dry(clone, target)
    assert "-m venv .venv" in lines[0] and any("pip install" in line and "-e" in line for line in lines)
    assert lines[-1].endswith(command) and "touch .venv/.stamp" in lines[-2]


@pytest.mark.parametrize("target", ["test", "demo"])
def test_a_stale_environment_is_refreshed_and_a_fresh_one_kept(clone: Path, target: str) -> None:
    _stamp(clone, newer_than_sources=False)  # pyproject.toml edited after the last install
    assert any("pip install" in line for line in dry(clone, target))
    _stamp(clone, newer_than_sources=True)
    assert len(dry(clone, target)) == 1  # only the target's own command
    t = os.stat(clone / ".venv" / ".stamp").st_mtime
    os.utime(clone / "setup.py", (t + 1, t + 1))  # setup.py changed after the install
    assert any("pip install" in line for line in dry(clone, target))


def test_pytest_collecting_nothing_fails_make_test(clone: Path, tmp_path: Path) -> None:
    _stamp(clone, newer_than_sources=True)
    empty = tmp_path / "no_tests"
    empty.mkdir()
    fake = tmp_path / "py"
    # the real pytest on a folder without tests: exit code 5
    fake.write_text(f"#!/bin/sh\nexec {sys.executable} -m pytest -q -p no:cacheprovider {empty}\n")
    fake.chmod(0o755)
    assert subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(empty)],
                          capture_output=True).returncode == 5
    run = subprocess.run(["make", "--no-print-directory", "test", f"PY={fake}"], cwd=clone,
                         capture_output=True, text=True, env=ENV)
    assert run.returncode != 0 and "Error 5" in run.stderr


def test_ci_runs_the_readme_commands_and_fails_when_they_fail(repo: Path) -> None:
    readme = (repo / "README.md").read_text(encoding="utf-8")
    quick = readme.split("## Quick start", 1)[1].split("```", 2)[1]
    commands = sorted(line.split("#")[0].strip() for line in quick.splitlines()[1:] if line.strip())
    ci = (repo / ".ci" / "run").read_text(encoding="utf-8")
    body = [line.strip() for line in ci.splitlines() if line.strip() and not line.lstrip().startswith("#")]
    assert "set -euo pipefail" in body
    assert sorted(line for line in body if line.startswith("make")) == commands
    assert not any(re.search(r"\|\||;\s*true\b|set \+e", line) for line in body)  # nothing hides an exit code
