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
        if cmd_name in NO_BLAS and "numpy" not in sys.modules:
            # numpy's OpenBLAS starts a thread per core when numpy is imported; these commands never call
            # BLAS (and run no user code, which would inherit the setting): one thread saves ~30 ms of
            # CPU on every run, more on a loaded machine. An explicit setting is kept.
            os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
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
            click.echo("nsroof: aborted", err=True)
            sys.exit(1)
        sys.exit(rv if isinstance(rv, int) else 0)

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except NsroofError as exc:
            click.echo(f"nsroof: error: {exc}", err=True)
            ctx.exit(2)


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
