"""The options every command shares, declared once so they read and behave the same everywhere (the way
sqlite-utils shares its option decorators): `--machine`, `-o/--output`, `--top`, `--threads`, `--quiet`,
`--level`, the selection (`--kernel`, `--nvtx`, `--step`, `--device`, `--source`) and the machine-readable
outputs (`--json`, `--csv`); and the progress line long steps print.

Each decorator takes only what truly differs per command (what the output is, what --top lists, what an
omitted --machine means); the flag names, metavars, types and the first words of the help are fixed here.
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TextIO, TypeVar

import click

F = TypeVar("F", bound=Callable[..., Any])

MACHINE_HELP = ("Machine ceilings: a name or alias from `nsroof machines`, the device name as ncu or "
                "nvidia-smi print it, or a JSON profile (as `nsroof measure` writes); over an export's own "
                "ncu peaks it is a what-if")


def machine_option(*, when_omitted: str, default: str | None = None) -> Callable[[F], F]:
    """--machine NAME|DEVICE|FILE. Its meaning is roofs.machines.resolve()'s; `when_omitted` says what the
    command uses without it."""
    return click.option("--machine", "machine", default=default, metavar="NAME|DEVICE|FILE",
                        show_default=default is not None, help=f"{MACHINE_HELP}. Without it: {when_omitted}.")


def output_option(what: str, *, default: Path | None = None, required: bool = False) -> Callable[[F], F]:
    """-o/--output PATH: `what` the command writes there."""
    return click.option("-o", "--output", "output", type=click.Path(path_type=Path), default=default,
                        required=required, show_default=default is not None, metavar="PATH",
                        help=f"Write {what}.")


def top_option(what: str, *, default: int = 10, order: str = "longest first") -> Callable[[F], F]:
    """--top N: how many rows (kernels, ops, labels) the command shows, in `order`."""
    return click.option("--top", "top", type=click.IntRange(min=0), default=default, show_default=True,
                        metavar="N", help=f"Number of {what}, {order} (0: none).")


def threads_option(*, default: int | None = None) -> Callable[[F], F]:
    """--threads N: torch's CPU (intra-op) threads for the run; 0 or omitted is torch's own choice."""
    return click.option("--threads", "threads", type=click.IntRange(min=0), default=default, metavar="N",
                        show_default=default is not None,
                        help="torch CPU threads for the run (0: torch's own choice, the core count). Fewer "
                             "threads give steadier times on a busy machine.")


def remeasure_option(what: str) -> Callable[[F], F]:
    """--remeasure: measure this CPU's roofline anew instead of using the cached profile; `what` says what
    the command then does with it."""
    return click.option("--remeasure", "remeasure", is_flag=True, help=f"Measure the roofline anew: {what}.")


def capture_option() -> Callable[[F], F]:
    return click.option("--capture", "captures", multiple=True, type=click.Path(path_type=Path),
                        help="A torch.profiler trace recorded around the capture of the CUDA/HIP graphs the "
                             "trace replays: replayed kernels get the ops recorded at capture (repeatable).")


def quiet_option() -> Callable[[F], F]:
    """-q/--quiet: nothing but errors and warnings (no summary, no 'wrote …' line, no progress lines)."""
    return click.option("-q", "--quiet", "quiet", is_flag=True,
                        help="Print nothing but errors and warnings: no summary, no progress lines.")


def level_option(levels: Sequence[str], *, default: str, what: str) -> Callable[[F], F]:
    """--level, one of `levels`: anything else is a usage error (exit 2), never a silent 'n/a'."""
    return click.option("--level", "level", type=click.Choice(list(levels)), default=default,
                        show_default=True, help=what)


SELECTION_OPTIONS: tuple[tuple[str, str, str], ...] = (
    ("kernel", "REGEX",
     "Only kernels whose function or kernel name matches (case-insensitive search, e.g. gemm)."),
    ("nvtx", "REGEX", "Only kernels whose NVTX path matches (e.g. 'layer0/attn')."),
    ("step", "N|N-M|N,M", "Only kernels of these training steps (the report's `step` column)."),
    ("device", "REGEX", "Only kernels that ran on a matching device (e.g. H100)."),
    ("source", "REGEX", "Only kernels from a matching input file (reports and datasets of several inputs)."),
)


def selection_options() -> Callable[[F], F]:
    """--kernel, --nvtx, --step, --device, --source: which kernels the command reads. The command gets one
    `selection` argument (nsroof.report.selection.Selection) instead of the five."""
    import functools

    def decorate(command: F) -> F:
        @functools.wraps(command)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            from nsroof.report.selection import from_options

            values = {name: kwargs.pop(name) for name, _, _ in SELECTION_OPTIONS}
            return command(*args, selection=from_options(**values), **kwargs)

        for name, metavar, text in reversed(SELECTION_OPTIONS):
            wrapper = click.option(f"--{name}", name, metavar=metavar, default=None, help=text)(wrapper)
        return wrapper  # type: ignore[return-value]

    return decorate


def table_output_options(what: str) -> Callable[[F], F]:
    """--json / --csv: print `what` on stdout for scripts (one wide row per kernel), instead of the tables."""
    def decorate(command: F) -> F:
        command = click.option("--csv", "as_csv", is_flag=True,
                               help=f"Print {what} as CSV on stdout.")(command)
        return click.option("--json", "as_json", is_flag=True,
                            help=f"Print {what} as JSON on stdout.")(command)

    return decorate


def check_suffix(path: Path | None, suffixes: Sequence[str], what: str) -> None:
    """A usage error (exit 2) when `path` has a suffix the command cannot write, naming the ones it can."""
    if path is None or path.suffix.lower() in suffixes:
        return
    raise click.BadParameter(f"{path}: cannot write {what} as {path.suffix or 'a file without suffix'!r}; "
                             "name it " + " or ".join(f"*{s}" for s in suffixes), param_hint="-o/--output")


def apply_threads(threads: int | None) -> int:
    """Set torch's CPU threads when asked (`threads` > 0); the count in force after."""
    import torch

    if threads:
        torch.set_num_threads(threads)
    return int(torch.get_num_threads())


# --------------------------------------------------------------------------- progress


class Progress:
    """Progress lines on stderr for steps that take more than a moment: shown when stderr is a terminal and
    --quiet is off, silent when piped or redirected (a log or a CI run gets only the results)."""

    def __init__(self, quiet: bool = False, stream: TextIO | None = None, *, after_s: float = 2.0) -> None:
        self.stream = stream if stream is not None else sys.stderr
        self.enabled = not quiet and _isatty(self.stream)
        self.after_s = after_s
        self.t0 = time.perf_counter()

    def line(self, message: str) -> None:
        """One line with the time since the command started (a step of a long run)."""
        if self.enabled:
            self.stream.write(f"[{time.perf_counter() - self.t0:6.1f} s] {message}\n")
            self.stream.flush()

    @contextmanager
    def waiting(self, label: str) -> Iterator[None]:
        """Around one long call: after `after_s`, a line '<label>… N s' rewritten in place each second, and
        closed with the total when the call returns. Calls that finish sooner print nothing."""
        stop = self.start(label)
        try:
            yield
        finally:
            stop()

    def start(self, label: str) -> Callable[[], None]:
        """`waiting` split in two, for a step that ends inside someone else's `with` block: start now, call
        the returned function when the step is over."""
        if not self.enabled:
            return lambda: None
        done = threading.Event()
        start = time.perf_counter()
        shown = threading.Event()

        def tick() -> None:
            if done.wait(self.after_s):
                return
            while not done.is_set():
                self.stream.write(f"\r{label}… {time.perf_counter() - start:.0f} s")
                self.stream.flush()
                shown.set()
                done.wait(1.0)

        thread = threading.Thread(target=tick, name="nsroof-progress", daemon=True)
        thread.start()

        def stop() -> None:
            if done.is_set():
                return
            done.set()
            thread.join()
            if shown.is_set():
                self.stream.write(f"\r{label}… done in {time.perf_counter() - start:.1f} s\n")
                self.stream.flush()

        return stop


# --------------------------------------------------------------------------- run checks


def steps_warning(steps: int | None, warmup: int, ran: int, source: str) -> str:
    """A warning when --steps (after --warmup) asks for more steps than the script ran ('' otherwise)."""
    if steps is None or ran >= warmup + steps:
        return ""
    recorded = max(ran - warmup, 0)
    return (f"--steps {steps} (after --warmup {warmup}) asked for {warmup + steps} steps but the script ran "
            f"{ran} ({source or 'no step marks: no optimizer.step() or nsroof.step()'}); the report holds "
            f"{recorded} recorded step{'s' if recorded != 1 else ''}")


class LoadWatch:
    """The 1-minute load average at the start and the end of a run, against the CPU count: a run on a busy
    machine gets the same warning `nsroof measure` prints (nsroof.collectors.measure.runner.busy_note)."""

    def __init__(self) -> None:
        from nsroof.collectors.measure.environment import load_average

        self.start = load_average()

    def warning(self) -> str:
        import os
        import sys

        from nsroof.collectors.measure.environment import load_average
        from nsroof.collectors.measure.runner import busy_note

        torch = sys.modules.get("torch")  # the run's thread count, when it ran torch (never imported here)
        env = {"logical_cpus": os.cpu_count(), "load_average_at_start": self.start,
               "load_average_at_end": load_average(),
               "threads_used": torch.get_num_threads() if torch is not None else None}
        return busy_note(env) or ""


def _isatty(stream: Any) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):
        return False


def cost_facts_words() -> list[str]:
    """The --model-config/--formulas options the running command was given, as words of a command line
    (their decorator consumes them before the command's function sees them)."""
    params = click.get_current_context().params
    words = ["--model-config", str(params["model_config"])] if params.get("model_config") else []
    for path in params.get("formulas") or ():
        words += ["--formulas", str(path)]
    return words


def cost_facts_options() -> Callable[[F], F]:
    """--model-config CONFIG.json (the model facts engine ops' costs need) and --formulas FILE.py (your own
    @nsroof.formula ops), applied to everything the command costs."""

    def decorate(fn: F) -> F:
        import functools

        @functools.wraps(fn)
        def run(*args: Any, model_config: Path | None = None, formulas: tuple[Path, ...] = (),
                **kwargs: Any) -> Any:
            if model_config is None and not formulas:  # the ledger is imported where a cost is worked out
                return fn(*args, **kwargs)
            from nsroof.costs.ledger.custom import load_file, using_model
            from nsroof.costs.ledger.engine_context import read_model_config

            for path in formulas:
                load_file(str(path))
            with using_model(read_model_config(str(model_config)) if model_config else None):
                return fn(*args, **kwargs)

        run = click.option("--formulas", "formulas", multiple=True,
                           type=click.Path(path_type=Path, dir_okay=False),
                           metavar="FILE.py", help="Python file of @nsroof.formula(\"ns::op\") functions "
                           "costing your own ops (repeatable).")(run)
        run = click.option("--model-config", "model_config", type=click.Path(path_type=Path, dir_okay=False),
                           metavar="CONFIG.json", help="The model's Hugging Face config.json: experts, "
                           "top-k, expert size, heads, sliding window for engine ops (vllm::moe_forward, "
                           "attention).")(run)
        return run  # type: ignore[return-value]

    return decorate
