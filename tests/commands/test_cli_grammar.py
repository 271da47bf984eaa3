"""One CLI grammar: the shared options read and behave the same in every command; choices are validated;
progress lines only on a terminal; profile warns about short runs and a busy machine (what measure caches
for profile: test_measure_cache_cli.py)."""

from __future__ import annotations

import io
import queue
import re
import shutil
import threading
from pathlib import Path
from types import SimpleNamespace

import click
import pytest
from click.testing import CliRunner

from nsroof.cli import COMMANDS, cli
from nsroof.commands.options import MACHINE_HELP, Progress, steps_warning


def _commands() -> dict[str, click.Command]:
    ctx = click.Context(cli)
    return {name: cli.get_command(ctx, name) for name in COMMANDS}  # type: ignore[misc]


def _param(command: click.Command, name: str) -> click.Option | None:
    return next((p for p in command.params if isinstance(p, click.Option) and p.name == name), None)


def test_shared_options_read_the_same_in_every_command() -> None:
    seen: dict[str, list[str]] = {"machine": [], "output": [], "top": [], "threads": [], "quiet": []}
    for name, command in _commands().items():
        for option in seen:
            p = _param(command, option)
            if p is None:
                continue
            seen[option].append(name)
            if option == "machine":
                assert p.opts == ["--machine"] and p.metavar == "NAME|DEVICE|FILE", name
                assert (p.help or "").startswith(MACHINE_HELP + ". Without it: "), name
            elif option == "output":
                assert p.opts == ["-o", "--output"] and p.metavar == "PATH", name
                assert (p.help or "").startswith("Write "), name
            elif option == "top":
                assert p.opts == ["--top"] and isinstance(p.type, click.IntRange) and p.type.min == 0, name
                assert re.fullmatch(r"Number of .+, (longest|largest time change) first \(0: none\)\.",
                                    p.help or ""), name
            elif option == "threads":
                assert (p.opts == ["--threads"] and isinstance(p.type, click.IntRange)
                        and p.type.min == 0), name
            elif option == "quiet":
                assert p.opts == ["-q", "--quiet"] and p.is_flag, name
    # --machine in every command that resolves ceilings; --threads where torch runs on the CPU
    assert set(seen["machine"]) == {"analyze", "compare", "demo", "ledger", "machines", "ncu", "nsys",
                                    "profile"}
    assert {"demo", "measure", "profile"} <= set(seen["threads"])
    assert {"analyze", "measure", "profile"} <= set(seen["quiet"])


@pytest.mark.parametrize("args", [
    ["ledger", "gemm", "--m", "8", "--n", "8", "--k", "8", "--level", "foo"],
    ["ledger", "--sweep", "--level", "hbm"],
    ["plot", "r.parquet", "-o", "x.png", "--level", "l9"],
    ["analyze", "x.csv", "--top", "-1"],
])
def test_a_bad_choice_is_a_usage_error(args: list[str]) -> None:
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 2, result.output
    assert result.stderr.startswith("nsroof: error: Invalid value for ") and result.stderr.count("\n") == 1
    assert "n/a" not in result.stdout


def test_the_ledger_refuses_an_unknown_level_itself() -> None:
    from nsroof.costs import ledger
    from nsroof.roofs import ledger_analysis, machines

    with pytest.raises(ledger.LedgerError, match="unknown memory level 'foo'"):
        ledger_analysis.analyze(ledger.operator("gemm", m=8, n=8, k=8), machines.load("h100-sxm"),
                                level="foo")


# --------------------------------------------------------------------------- progress


class _Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


class _SteppedEvent:
    """threading.Event as Progress uses it (set, is_set, wait), with every wait that would block handed to
    the test through `waits`: the test answers False (the timeout passed: it moves the clock itself), or
    set() answers True. So the progress thread writes only between two steps the test takes."""

    def __init__(self, waits: queue.Queue[tuple[float, queue.Queue[bool]]]) -> None:
        self._flag = False
        self._lock = threading.Lock()
        self._answer: queue.Queue[bool] | None = None
        self._waits = waits

    def is_set(self) -> bool:
        return self._flag

    def set(self) -> None:
        with self._lock:
            self._flag = True
            answer, self._answer = self._answer, None
        if answer is not None:
            answer.put(True)

    def wait(self, timeout: float) -> bool:
        with self._lock:
            if self._flag:
                return True
            answer = self._answer = queue.Queue()
        self._waits.put((timeout, answer))
        return answer.get(timeout=60)  # a hang guard only: the test answers at once


def test_progress_lines_only_on_a_terminal_and_not_when_quiet(monkeypatch: pytest.MonkeyPatch) -> None:
    """On a clock and events the test holds: nothing sleeps, and no line depends on how the threads are
    scheduled."""
    from nsroof.commands import options

    clock = [100.0]
    waits: queue.Queue[tuple[float, queue.Queue[bool]]] = queue.Queue()
    monkeypatch.setattr(options, "time", SimpleNamespace(perf_counter=lambda: clock[0]))
    monkeypatch.setattr(options, "threading",
                        SimpleNamespace(Thread=threading.Thread, Event=lambda: _SteppedEvent(waits)))

    def pass_the_wait(expected_timeout: float) -> None:
        timeout, answer = waits.get(timeout=60)
        assert timeout == expected_timeout
        clock[0] += timeout
        answer.put(False)

    tty, pipe, quiet = _Tty(), io.StringIO(), _Tty()
    for stream, q in ((tty, False), (pipe, False), (quiet, True)):
        clock[0] = 100.0
        p = Progress(q, stream, after_s=2.0)
        clock[0] += 1.5
        p.line("step one")
        stop = p.start("building")
        if p.enabled:
            pass_the_wait(2.0)  # after_s without the call returning: the line appears, 2 s
            pass_the_wait(1.0)  # rewritten each second: 3 s
            waits.get(timeout=60)  # the progress thread waits for its next second ...
        clock[0] += 0.3
        stop()  # ... when the call returns, 3.3 s after it began
        with p.waiting("quick"):
            pass  # done before after_s: nothing printed (its thread, if it got to wait, is answered by set)
        while not waits.empty():
            waits.get()
    assert tty.getvalue() == ("[   1.5 s] step one\n"
                              "\rbuilding… 2 s\rbuilding… 3 s\rbuilding… done in 3.3 s\n")
    assert pipe.getvalue() == "" and quiet.getvalue() == ""


# --------------------------------------------------------------------------- profile


def test_steps_beyond_the_run_are_warned() -> None:
    # --warmup 1 --steps 10 on a 3-step script: 11 asked, 3 ran, 2 recorded
    text = steps_warning(10, 1, 3, "nsroof steps")
    assert text == ("--steps 10 (after --warmup 1) asked for 11 steps but the script ran 3 (nsroof steps); "
                    "the report holds 2 recorded steps")
    assert steps_warning(3, 0, 3, "optimizer steps") == "" and steps_warning(None, 0, 0, "") == ""


def test_profile_threads_and_the_short_run_warning(cpu_machine_json: Path, tmp_path: Path) -> None:
    pytest.importorskip("torch")
    import torch

    script = tmp_path / "three_steps.py"
    script.write_text("import torch\nimport nsroof\n"
                      "a = torch.randn(64, 64)\n"
                      "for _ in range(3):\n    torch.mm(a, a)\n    nsroof.step()\n")
    threads = torch.get_num_threads()
    try:
        result = CliRunner().invoke(cli, ["profile", "--steps", "10", "--threads", "1", "--machine",
                                          str(cpu_machine_json), "-o", str(tmp_path / "r.parquet"), "--",
                                          "python", str(script)])
        assert torch.get_num_threads() == 1
    finally:
        torch.set_num_threads(threads)
    assert result.exit_code == 0, result.output
    # --warmup 1 by default: 11 steps asked for, 2 of the 3 recorded
    assert "warning: --steps 10 (after --warmup 1) asked for 11 steps but the script ran 3" in result.stderr


# --------------------------------------------------------------------------- the ncu --metrics hint


def test_the_metrics_hint_is_one_line_per_run_with_the_list_in_a_file(data_dir: Path, tmp_path: Path) -> None:
    from nsroof.commands.hints import fold_metrics_hints
    from nsroof.counters.metric_formulas import required_metrics
    from nsroof.pipeline import analyze

    for name in ("a.csv", "b.csv"):  # two incomplete exports in one run
        shutil.copy(data_dir / "ncu" / "details_new.csv", tmp_path / name)
    report = analyze([tmp_path / "a.csv", tmp_path / "b.csv"], machine="h100-sxm")
    assert sum("lack roofline counters" in h for h in report.hints) == 2  # the pipeline: one per file
    import pickle

    from nsroof.schema import MISSING_COUNTERS

    # structured: the fields are read, never parsed back from the line (and survive a process pool)
    missing = [h for h in report.hints if getattr(h, "kind", "") == MISSING_COUNTERS]
    assert sorted(h.source for h in missing) == ["a.csv", "b.csv"] and [h.kernels for h in missing] == [2, 2]
    again = pickle.loads(pickle.dumps(missing[0]))
    assert (again, again.source, again.kind, again.metrics) == (missing[0], "a.csv", MISSING_COUNTERS,
                                                                missing[0].metrics)
    assert str(missing[0]) == f"a.csv: {missing[0].text}"
    listing = tmp_path / "r.ncu-metrics.txt"
    hints = fold_metrics_hints(report.hints, listing)
    lines = [h for h in hints if "lack roofline counters" in h]
    (cc,) = set(report.frame["cc"].astype(str))  # the list is the one for the exports' compute capability
    metrics = list(required_metrics(cc))
    assert lines == [f"4 kernel(s) in 2 files lack roofline counters; profile with "
                     f"`ncu --metrics $(cat {listing})` "
                     f"(the {len(metrics)} metrics the roofline needs, written to {listing})"]
    assert listing.read_text().strip().split(",") == metrics


def test_analyze_prints_the_hint_once_and_names_a_text_log_as_text(tmp_path: Path) -> None:
    from tests.importers.ncu.test_ncu_text import TEXT_2024

    log = tmp_path / "run.txt"
    log.write_text(TEXT_2024)
    result = CliRunner().invoke(cli, ["analyze", str(log), "-o", str(tmp_path / "run.parquet"), "--machine",
                                      "h100-sxm"])
    assert result.exit_code == 0, result.output
    assert result.stdout.count("lack roofline counters") == 1 and "--metrics gpu__" not in result.stdout
    assert (tmp_path / "run.ncu-metrics.txt").is_file()
    assert "details-page export" not in result.output  # the text log is ncu's text output, not a CSV export
    from nsroof import importers

    assert importers.read(log)[1].format == "ncu-text:details"


def test_a_busy_machine_during_profile_is_warned(monkeypatch: pytest.MonkeyPatch) -> None:
    from nsroof.collectors.measure import environment
    from nsroof.commands import options

    loads = iter([[0.4, 0.3, 0.2], [9.0, 5.0, 3.0]])  # start, end: 9 runnable on 2 CPUs
    monkeypatch.setattr(environment, "load_average", lambda: next(loads))
    monkeypatch.setattr("os.cpu_count", lambda: 2)
    watch = options.LoadWatch()
    assert watch.warning().startswith("load average up to 9.0 on 2 CPUs: other processes shared the CPU")


# --------------------------------------------------------------------------- one formatter, one key


def test_one_time_formatter() -> None:
    from nsroof.units import human_time

    # 3 significant digits for tables, fixed decimals for the ledger's arithmetic lines
    assert [human_time(x) for x in (1.76e-6, 0.0107, 12.3, 2e-10, 0.0)] == ["1.76 us", "10.7 ms", "12.3 s",
                                                                             "0.2 ns", "0 ns"]
    assert human_time(138.911e-6, decimals=3) == "138.911 us" and human_time(float("nan")) == "n/a"
    import nsroof.commands.ledger as ledger_cmd
    import nsroof.report.summary as summary

    assert summary.human_time is human_time and ledger_cmd.duration(0.0300488) == "30.049 ms"


def test_one_kernel_key() -> None:
    import pandas as pd

    from nsroof.report import chart_data
    from nsroof.schema import kernel_key

    frame = pd.DataFrame({"source": ["a.csv", "a.csv", None],
                          "kernel_id": pd.array([1, 1, 2], dtype="Int64")})
    assert list(kernel_key(frame)) == ["a.csv\x001", "a.csv\x001", "\x002"]
    assert chart_data.kernel_key is kernel_key
    import nsroof.roofs.classify as build
    import nsroof.roofs.ledger_join as join

    assert not hasattr(build, "kernel_key") and not hasattr(join, "_kernel_keys")


def test_a_dataset_run_prints_the_hint_once_with_the_list_beside_its_parts(data_dir: Path,
                                                                           tmp_path: Path) -> None:
    # two exports without FLOP/byte counters: two per-file hints fold into one
    for name in ("a.csv", "b.csv"):
        shutil.copy(data_dir / "ncu" / "details_new.csv", tmp_path / name)
    out = tmp_path / "ds"
    result = CliRunner().invoke(cli, ["analyze", str(tmp_path / "a.csv"), str(tmp_path / "b.csv"), "-o",
                                      str(out), "--machine", "h100-sxm", "-j", "1"])
    assert result.exit_code == 0, result.output
    (line,) = [ln for ln in result.stdout.splitlines() if "lack roofline counters" in ln]
    assert line.startswith("hint: ") and "in 2 files" in line and f"$(cat {out / '_ncu-metrics.txt'})" in line
    assert (out / "_ncu-metrics.txt").read_text().count(",") > 10
    import pandas as pd

    assert len(pd.read_parquet(out)) > 0  # the list beside the parts does not stop a reader of the folder
