"""The `nsroof analyze` command that makes a profile's report again from its saved trace.

The trace holds the run and the facts nsroof recorded in it (the step window, module ranges, TF32), but not
what the report was classified against: the machine (on a CPU this CPU's cached measured profile, which
`nsroof analyze` never looks up itself: without it every row is `unknown`) and the options that changed the
costing (`--capture`, `--model-config`, `--formulas`). The command names them all, so running it gives the
report's frame again.
"""

from __future__ import annotations

import os
import shlex
from collections.abc import Sequence
from typing import Any


def command(trace: str | os.PathLike[str], *, machine: str | None, captures: Sequence[Any] = (),
            extra: Sequence[str] = (), output: str | os.PathLike[str] | None = None) -> str:
    """`nsroof analyze TRACE [--machine M] [--capture C]… [extra…] [-o OUTPUT]`, quoted for a shell."""
    words = ["nsroof", "analyze", os.fspath(trace)]
    if machine:
        words += ["--machine", machine]
    for capture in captures:
        words += ["--capture", os.fspath(capture)]
    words += list(extra)
    if output is not None:
        words += ["-o", os.fspath(output)]
    return shlex.join(words)


def machine_argument(machine: Any) -> str | None:
    """How `--machine` names the Machine a report was classified against: the file it was loaded from, else
    a datasheet entry's name; None for no machine, or one built in Python that no name or file gives."""
    if machine is None:
        return None
    if machine.path:
        return str(machine.path)
    from nsroof.errors import NsroofError
    from nsroof.roofs import machines

    try:
        found = machines.load(machine.name)
    except NsroofError:
        return None
    return str(machine.name) if found.to_dict() == machine.to_dict() else None


def pending_machine_argument(*, cuda: bool) -> str | None:
    """The machine the report would be classified against, found without measuring anything (for a run
    stopped before its report was built): the cached CPU profile when there is one; on CUDA the cached GPU
    profile or the device's datasheet entry."""
    if cuda:  # as nsroof.collectors.torch_profile.resolve_machine finds it
        import torch

        from nsroof.collectors.measure.cache import cached_gpu_profile
        from nsroof.roofs import machines

        name = torch.cuda.get_device_name()
        return machine_argument(cached_gpu_profile(name) or machines.lookup_device(name))
    from nsroof.collectors.measure.cache import cpu_cache_path

    path = cpu_cache_path()
    return str(path) if path.is_file() else None


def for_session(session: Any, trace: str | os.PathLike[str], machine: Any = None, *,
                with_output: bool = True) -> str:
    """The command for an nsroof.profile session (its captures, its extra options, its report path when
    `with_output`): `machine` is the one its report was classified against, when it got that far."""
    if machine is None and session.machine_spec is not None and not isinstance(session.machine_spec, str):
        machine = session.machine_spec  # given, and resolved when the session started
    name = (machine_argument(machine) if machine is not None
            else pending_machine_argument(cuda=bool(getattr(session, "_use_cuda", False))))
    return command(trace, machine=name, captures=session.captures, extra=session.rebuild_options,
                   output=session.report_path if with_output else None)
