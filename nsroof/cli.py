"""The `nsroof` command line. Commands are thin: each lives in nsroof/commands/<name>.py and is
imported only when invoked, so `nsroof --help` stays fast and no command pays for another's imports."""

from __future__ import annotations

import importlib
import os
import sys
from typing import Any

import click

from nsroof._version import __version__
from nsroof.errors import NsroofError

# command name -> "module:click-command attribute"
COMMANDS: dict[str, str] = {
    "analyze": "nsroof.commands.analyze:analyze",
    "machines": "nsroof.commands.machines:machines",
    "ledger": "nsroof.commands.ledger:ledger",
    "measure": "nsroof.commands.measure:measure",
    "profile": "nsroof.commands.profile:profile",
    "ncu": "nsroof.commands.ncu:ncu",
    "nsys": "nsroof.commands.nsys:nsys",
    "plot": "nsroof.commands.plot:plot",
    "report": "nsroof.commands.report:report",
    "compare": "nsroof.commands.compare:compare",
    "demo": "nsroof.commands.demo:demo",
}


# commands that only read files and compute tables: no BLAS, no user script run beneath them
NO_BLAS = frozenset({"analyze", "machines", "ledger", "plot", "report", "compare"})


class LazyGroup(click.Group):
    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(name for name, target in COMMANDS.items() if _module_exists(target))

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        target = COMMANDS.get(cmd_name)
        if target is None or not _module_exists(target):
            return None
        if cmd_name in NO_BLAS:
            prepare_table_process()
        module_name, attr = target.split(":")
        command = getattr(importlib.import_module(module_name), attr)
        assert isinstance(command, click.Command)
        return command

    def main(self, args: Any = None, prog_name: str | None = None, complete_var: str | None = None,
             standalone_mode: bool = True, **extra: Any) -> Any:
        """Click's main, but every error a user can cause is one line on stderr (usage errors
        included, which click would print as a usage block), with click's exit codes."""
        if not standalone_mode:
            return super().main(args, prog_name, complete_var, standalone_mode=False, **extra)
        try:
            rv = super().main(args, prog_name, complete_var, standalone_mode=False, **extra)
        except click.UsageError as exc:
            where = exc.ctx.command_path if exc.ctx is not None else "nsroof"
            click.echo(f"nsroof: error: {exc.format_message()} (see `{where} --help`)", err=True)
            sys.exit(exc.exit_code)
        except click.ClickException as exc:
            click.echo(f"nsroof: error: {exc.format_message()}", err=True)
            sys.exit(exc.exit_code)
        except click.exceptions.Abort:
            # Ctrl-C (click turns KeyboardInterrupt into Abort): the shell's convention, 128 + SIGINT
            click.echo("nsroof: interrupted", err=True)
            sys.exit(130)
        sys.exit(rv if isinstance(rv, int) else 0)

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except NsroofError as exc:
            click.echo(f"nsroof: error: {exc}", err=True)
            # 2 (bad input) unless the error carries its own status (the user's script's, for nsroof profile)
            ctx.exit(getattr(exc, "exit_code", 2))


def prepare_table_process() -> None:
    """Process settings for the commands that only read files and compute tables (NO_BLAS), made before
    numpy and pyarrow are imported (in a process that imported them already, nothing changes); an
    explicit setting in the environment is kept.
    - numpy's OpenBLAS starts a thread per core when numpy is imported; these commands never call BLAS
      (and run no user code, which would inherit the setting): one thread saves ~30 ms of CPU a run.
    - Arrow allocates through the C library (ARROW_DEFAULT_MEMORY_POOL=system) instead of its bundled
      mimalloc, which keeps freed pages for reuse: on a 123 MB ncu export (benchmarks/bench_analyze.py,
      quiet 2-core machine) the peak resident set falls from 2.04x to 1.73-1.77x the file, the time the
      same (0.39-0.41 s). Holding glibc's trim and mmap thresholds at 128 KiB as well took it to 1.49x but
      cost ~20% of the time (0.49 s: fresh pages for every large block), so the C library keeps its own
      policy."""
    if "numpy" not in sys.modules:
        os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    if "pyarrow" in sys.modules:
        return
    os.environ.setdefault("ARROW_DEFAULT_MEMORY_POOL", "system")


def _module_exists(target: str) -> bool:
    import importlib.util

    return importlib.util.find_spec(target.split(":")[0]) is not None


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="nsroof")
def cli() -> None:
    """Hierarchical roofline analysis: which kernels are memory- or compute-bound at DRAM, L2 and L1,
    how far each runs from its roof, and the most you could gain."""


def main(argv: list[str] | None = None) -> None:
    cli.main(args=argv if argv is not None else sys.argv[1:], prog_name="nsroof")
