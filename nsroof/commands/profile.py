"""`nsroof profile [--steps N] [--warmup N] [--machine …] -o report.parquet -- python script.py args…`

The script runs in this process (runpy, with sys.argv and sys.path[0] set as `python script.py` would),
inside nsroof.profile. In-process rather than a child with a bootstrap: the profiler, the optimizer step
hook and the module hooks must live in the interpreter that runs the model, and a child would need the same
wrapper plus a channel to ship the report back; runpy gives that for free, and `__name__ == "__main__"`
blocks still run. The cost: the script shares the interpreter with nsroof (its imports are already loaded).
"""

from __future__ import annotations

import os
import runpy
import sys
import traceback
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

import click

from nsroof.commands.options import (
    LoadWatch,
    Progress,
    apply_threads,
    machine_option,
    output_option,
    quiet_option,
    steps_warning,
    threads_option,
    top_option,
)
from nsroof.errors import InputError, NsroofError


def split_command(command: Sequence[str]) -> tuple[str, str, list[str]]:
    """('script'|'module', target, args) from `python script.py a b`, `script.py a b` or `python -m pkg a`."""
    words = list(command)
    if words and Path(words[0]).name.startswith("python"):
        words = words[1:]
    if not words:
        raise NsroofError("no script to profile: nsroof profile -o report.parquet -- python script.py [args]")
    if words[0] == "-m":
        if len(words) < 2:
            raise NsroofError("`-m` needs a module name: nsroof profile -- python -m package.module [args]")
        return "module", words[1], words[2:]
    if words[0].startswith("-"):
        raise NsroofError(f"python option {words[0]!r} is not supported here; pass the script path or -m MODULE")
    script = Path(words[0])
    if not script.is_file():
        raise InputError(script, "no such script", hint="pass the path of the Python script to profile")
    return "script", str(script), words[1:]


@contextmanager
def script_environment(kind: str, target: str, args: list[str]) -> Iterator[None]:
    """sys.argv and sys.path[0] as the interpreter sets them for `python script.py args`; restored after."""
    saved_argv, saved_path = sys.argv[:], sys.path[:]
    sys.argv = [target, *args]
    sys.path.insert(0, str(Path(target).resolve().parent) if kind == "script" else os.getcwd())
    try:
        yield
    finally:
        sys.argv, sys.path[:] = saved_argv, saved_path


def runner(kind: str, target: str) -> Callable[[], object]:
    if kind == "module":
        return lambda: runpy.run_module(target, run_name="__main__", alter_sys=True)
    return lambda: runpy.run_path(target, run_name="__main__")


def run_script(kind: str, target: str, args: list[str]) -> None:
    """Run the user's script; its own exception is shown with its traceback, then reported as one line."""
    with script_environment(kind, target, args):
        try:
            runner(kind, target)()
        except SystemExit as exc:
            if exc.code not in (0, None):
                raise NsroofError(f"{target} exited with status {exc.code}; no report written") from None
        except NsroofError:
            raise
        except Exception as exc:
            traceback.print_exc()
            raise NsroofError(f"{target} raised {type(exc).__name__}: {exc}; no report written") from None


@click.command(context_settings={"ignore_unknown_options": True, "allow_interspersed_args": False})
@click.option("--steps", type=click.IntRange(min=1), metavar="N",
              help="Record N steps (optimizer steps, or nsroof.step() marks).")
@click.option("--warmup", type=click.IntRange(min=0), default=0, show_default=True, metavar="N",
              help="Steps to skip first.")
@machine_option(when_omitted="the GPU's datasheet entry, or on CPU this CPU's measured profile (measured once, cached)")
@output_option("the report (Parquet)", default=Path("nsroof-profile.parquet"))
@top_option("ops in the summary")
@threads_option()
@quiet_option()
@click.argument("command", nargs=-1, required=True, type=click.UNPROCESSED)
def profile(steps: int | None, warmup: int, machine: str | None, output: Path, top: int, threads: int | None,
            quiet: bool, command: tuple[str, ...]) -> None:
    """Run a Python script under torch.profiler and write a roofline report of every op call
    (analytic FLOPs and bytes from the ledger formulas), e.g.
    `nsroof profile -o r.parquet -- python train.py --epochs 1`."""
    from nsroof.collectors.torch_profile import profile as nsroof_profile
    from nsroof.collectors.torch_profile import render_summary
    from nsroof.report import parquet

    kind, target, args = split_command(command)
    apply_threads(threads)  # before the announcement: the cached CPU profile is per thread count
    pending = _announce_cpu_measurement(machine)
    progress, load = Progress(quiet), LoadWatch()
    session = nsroof_profile(machine=machine, steps=steps, warmup=warmup)
    stop = None
    try:
        with session:
            run_script(kind, target, args)
            # leaving the block stops the profiler and builds the report (and measures the CPU the first time)
            stop = progress.start("building the report" + (" and measuring this CPU's roofline (once)" if pending else ""))
    finally:
        if stop is not None:
            stop()
    result = session.result
    assert result is not None
    warnings = [w for w in (steps_warning(steps, warmup, result.steps_marked, result.step_source), load.warning()) if w]
    inputs = [parquet.input_record(target)] if kind == "script" else []
    parquet.write(result.report, output, inputs=inputs, machine=result.machine, extra_metadata={
        "collector": "torch.profiler",
        "command": [kind, target, *args],
        "steps": steps, "warmup": warmup,
        "steps_marked": result.steps_marked, "step_source": result.step_source,
        "torch_version": _torch_version(),
        "warnings": result.warnings + warnings,
    })
    click.echo(render_summary(result, top=top, output=str(output)))
    for w in warnings:
        click.echo(f"warning: {w}", err=True)


def _announce_cpu_measurement(machine: str | None) -> str:
    """The first CPU run measures the CPU's roofline after the script (about a minute): say so up front.
    Returns where that profile will be cached ('' when nothing is to be measured)."""
    if machine is not None:
        return ""
    import torch

    from nsroof.collectors.torch_profile import cpu_profile_pending

    pending = "" if torch.cuda.is_available() else cpu_profile_pending()
    if pending:
        click.echo(f"nsroof: no CPU roofline cached yet: measuring it after the run (about a minute, once; "
                   f"cached in {pending}); --machine skips this", err=True)
    return pending


def _torch_version() -> str:
    import torch

    return str(torch.__version__)
