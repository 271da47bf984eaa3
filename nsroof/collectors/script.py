"""Running the user's script in this process, as `python script.py args` or `python -m module args` would:
shared by `nsroof profile` (inside nsroof.profile) and `nsroof ncu`'s bootstrap (inside ncu).

In-process rather than a child with a bootstrap: the profiler, the optimizer step hook and the module hooks
must live in the interpreter that runs the model, and a child would need the same wrapper plus a channel
to ship the report back; runpy gives that for free, and `__name__ == "__main__"` blocks still run. The
cost: the script shares the interpreter with nsroof (its imports are already loaded).
"""

from __future__ import annotations

import os
import re
import runpy
import sys
import threading
import traceback
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

from nsroof.errors import InputError, NsroofError

#: what kineto (torch.profiler's C++ side) prints on every start and stop, straight to fd 2
KINETO_NOISE = re.compile(rb"^USDT:.*\] profiler_(start|stop)\s*$")


class ScriptExit(NsroofError):
    """The user's script ended with a failure: its own exit status (sys.exit(N); 1 for an exception, as
    python gives), which the CLI exits with instead of nsroof's usage-error code 2."""

    def __init__(self, message: str, exit_code: int) -> None:
        super().__init__(message)
        self.exit_code = exit_code


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
        raise NsroofError(f"python option {words[0]!r} is not supported here; pass the script path or "
                          "-m MODULE")
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
    """Run the user's script; its own exception is shown with its traceback, then reported as one line
    (ScriptExit, carrying the status python would have exited with)."""
    with script_environment(kind, target, args):
        try:
            runner(kind, target)()
        except SystemExit as exc:
            if exc.code not in (0, None):
                code = exc.code if isinstance(exc.code, int) else 1  # sys.exit("message") exits 1
                if not isinstance(exc.code, int):
                    print(exc.code, file=sys.stderr)
                raise ScriptExit(f"{target} exited with status {exc.code}; no report written", code) from None
        except NsroofError:
            raise
        except Exception as exc:
            traceback.print_exc()
            raise ScriptExit(f"{target} raised {type(exc).__name__}: {exc}; no report written", 1) from None


@contextmanager
def filtered_stderr(noise: re.Pattern[bytes] = KINETO_NOISE) -> Iterator[None]:
    """File descriptor 2 through a filter that drops the lines matching `noise` (kineto writes its
    `USDT: … profiler_start` lines from C++, below sys.stderr) and passes everything else on unchanged."""
    try:
        sys.stderr.flush()
        saved = os.dup(2)
    except (OSError, ValueError, AttributeError):
        yield  # no real fd 2 (an embedding host): nothing to filter
        return
    read_end, write_end = os.pipe()
    os.dup2(write_end, 2)
    os.close(write_end)

    def forward() -> None:
        with os.fdopen(read_end, "rb") as pipe:
            for line in pipe:
                if not noise.match(line):
                    os.write(saved, line)

    thread = threading.Thread(target=forward, name="nsroof-stderr", daemon=True)
    thread.start()
    try:
        yield
    finally:
        try:
            sys.stderr.flush()
        except (OSError, ValueError):
            pass
        os.dup2(saved, 2)  # closes the pipe's last write end: the thread drains and ends
        thread.join(timeout=5)
        os.close(saved)
