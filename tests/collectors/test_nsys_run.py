"""`nsroof nsys`: the nsys profile command it builds (traces, graph nodes, the NVTX capture range of the
profiled step, the bootstrap), that the real `nsys` accepts it (skipped without nsys:
../shared/tools/get-nsys.sh, then NSROOF_NSYS=…), and that the SQLite export it keeps carries neither the
host's environment variables nor its process list."""

from __future__ import annotations

import os
import shlex
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from nsroof.cli import cli
from nsroof.collectors import nsys_run
from nsroof.collectors.ncu_select import make_selection
from nsroof.importers.nsys.rep import find_nsys
from tests.importers.nsys.synthetic import Export, write

SCRIPT = "import sys; print('ran', sys.argv[1:])"


def _dry_run(*args: str) -> list[str]:
    r = CliRunner().invoke(cli, ["nsys", "--dry-run", *args])
    assert r.exit_code == 0, r.output
    return r.stdout.splitlines()


def test_the_dry_run_prints_profile_export_and_analyze(tmp_path: Path) -> None:
    lines = _dry_run("-o", str(tmp_path / "run"), "--", sys.executable, "train.py", "--lr", "0.1")
    profile = shlex.split(lines[1])
    assert profile[0] == "NSYS_NVTX_PROFILER_REGISTER_ONLY=0"
    i = profile.index("profile")
    assert Path(profile[i - 1]).name == "nsys"
    options = profile[i + 1:profile.index(sys.executable)]
    assert {"--trace=cuda,nvtx,osrt", "--cuda-graph-trace=node", "--capture-range=nvtx",
            "--capture-range-end=stop", f"--output={tmp_path / 'run'}.nsys-rep"} <= set(options)
    assert any(o.startswith("--nvtx-capture=nsroof.step") for o in options)
    assert profile[-6:] == ["--after-steps", "1", "--", "train.py", "--lr", "0.1"]
    assert shlex.split(lines[3])[1:3] == ["export", "--type"] and lines[3].endswith("run.nsys-rep")
    assert lines[5].endswith(f"--analyze {tmp_path / 'run'}")


def test_whole_runs_have_no_capture_range(tmp_path: Path) -> None:
    out = nsys_run.outputs_for(tmp_path / "run.parquet")
    cmd = nsys_run.nsys_command("nsys", ["python", "t.py"], out, selection=make_selection(whole=True))
    assert not [w for w in cmd if w.startswith("--capture-range")] and out.sqlite == tmp_path / "run.sqlite"
    assert nsys_run.capture_filter(make_selection(range_name="decode", nvtx_backend="torch")) == "decode"
    assert nsys_run.capture_filter(make_selection(range_name="decode")) == "decode@nsroof"


def test_the_export_keeps_no_environment_and_no_process_list(tmp_path: Path) -> None:
    path = write(tmp_path / "run.sqlite", Export(kernels=[("k", 1000, 2000, 1, 7)]))
    block = "HOME=/home/me\x00SECRET_TOKEN=abc\x00PATH=/usr/bin"
    with sqlite3.connect(path) as db:
        db.executescript("""CREATE TABLE TARGET_INFO_SYSTEM_ENV (name TEXT, value TEXT);
                            CREATE TABLE PROCESSES (globalPid INTEGER, pid INTEGER, name TEXT);
                            CREATE TABLE META_DATA_CAPTURE (name TEXT, value TEXT);""")
        db.execute("INSERT INTO TARGET_INFO_SYSTEM_ENV VALUES ('DeviceEnvironment', 'SECRET_TOKEN=abc')")
        db.execute("INSERT INTO PROCESSES VALUES (1, 4242, 'sshd: me')")
        db.executemany("INSERT INTO META_DATA_CAPTURE VALUES (?, ?)",
                       [("PROCESS_0:ENVIRONMENT_VARIABLE", 'SECRET_TOKEN="abc"'),
                        ("PROCESS_0:CUDA_GRAPH_TRACE_OPTIONS:MODE", "Node")])
        db.execute("INSERT INTO StringIds VALUES (999, ?)", (block,))
    nsys_run.scrub(path)
    raw = path.read_bytes()
    assert b"SECRET_TOKEN" not in raw and b"sshd" not in raw and b"HOME=" not in raw
    with sqlite3.connect(path) as db:  # what the analysis reads is still there
        assert db.execute("SELECT value FROM META_DATA_CAPTURE").fetchall() == [("Node",)]
        assert db.execute("SELECT COUNT(*) FROM CUPTI_ACTIVITY_KIND_KERNEL").fetchone() == (1,)


NO_NSYS = "no nsys CLI (../shared/tools/get-nsys.sh, then NSROOF_NSYS=…)"


@pytest.mark.skipif(find_nsys() is None, reason=NO_NSYS)
def test_nsys_accepts_the_profile_options(tmp_path: Path) -> None:
    out = nsys_run.outputs_for(tmp_path / "run")
    cmd = nsys_run.nsys_command(str(find_nsys()), [sys.executable, "t.py"], out)
    # the options exactly as built, the application a one-line script instead of the bootstrap
    app = cmd.index(sys.executable)
    done = subprocess.run([*cmd[:app], sys.executable, "-c", SCRIPT, "x"], capture_output=True, text=True,
                          timeout=300, env=nsys_run.env())
    assert done.returncode == 0, done.stderr
    assert "ran ['x']" in done.stdout


LEGACY_NVTX = os.environ.get("NSROOF_TEST_NVTX_PATH", "")  # a folder holding nvtx <= 0.2.11 (pip --target)


@pytest.mark.skipif(find_nsys() is None or not LEGACY_NVTX,
                    reason="needs nsys and NSROOF_TEST_NVTX_PATH (a folder with PyPI nvtx <= 0.2.11, the "
                           "last whose ranges nsys 2023.4 records)")
def test_a_cpu_run_captures_the_profiled_step(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    script = tmp_path / "train.py"
    script.write_text("import torch\nimport nsroof\nm = torch.nn.Linear(4, 2)\n"
                      "opt = torch.optim.SGD(m.parameters(), lr=0.1)\nfor _ in range(3):\n"
                      "    with nsroof.annotate('fwd'):\n        loss = m(torch.ones(2, 4)).sum()\n"
                      "    loss.backward(); opt.step()\n")
    monkeypatch.setenv("PYTHONPATH", LEGACY_NVTX)
    r = CliRunner().invoke(cli, ["nsys", "--trace", "nvtx,osrt", "-o", str(tmp_path / "run"), "--",
                                 sys.executable, str(script)])
    # a CPU run records no kernel: the analysis says so in one line; the capture and its export are there
    assert r.exit_code == 2 and "without CUDA kernels" in r.stderr
    assert not (tmp_path / "run.nsys-rep").exists()  # removed: it holds the environment
    with sqlite3.connect(tmp_path / "run.sqlite") as db:
        texts = {t for (t,) in db.execute("SELECT s.value FROM NVTX_EVENTS n "
                                          "JOIN StringIds s ON s.id = n.textId")}
    assert {"nsroof.step", "fwd", "Linear"} <= texts  # step 2 only: the capture range
