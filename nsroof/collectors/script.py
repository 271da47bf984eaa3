"""Running the user's script in this process, as `python script.py args` or `python -m module args` would:
shared by `nsroof profile` (inside nsroof.profile) and `nsroof ncu`'s bootstrap (inside ncu).

In-process rather than a child with a bootstrap: the profiler, the optimizer step hook and the module hooks
must live in the interpreter that runs the model, and a child would need the same wrapper plus a channel
to ship the report back; runpy gives that for free, and `__name__ == "__main__"` blocks still run. The
cost: the script shares the interpreter with nsroof (its imports are already loaded).
"""

from __future__ import annotations

import os
import runpy
import sys
import traceback
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

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
