"""A torch profiler the profiled code starts on its own while nsroof.profile records: HF Trainer's or
Lightning's profiling, `with torch.profiler.profile():`, `prof.start()`, `torch.autograd.profiler.profile`,
`emit_nvtx`/`emit_itt`.

torch runs one profiling session per process. A second one started inside nsroof's takes that session over
(from then on ops are recorded with the inner profiler's settings, e.g. without shapes) and its stop ends it;
nsroof's own stop then meets no session, and exporting the trace kills the process in kineto: SIGSEGV,
exit -11, no message, no report, no trace.

So while nsroof records, a profiler the code starts is made a no-op (its instance's class is swapped for an
inert subclass, kept for the instance's life so its stop never touches the session): it records nothing, its
results are empty (an empty event list; an export writes an empty chrome trace), its `on_trace_ready` is not
called, and one warning says so, naming where it was started. nsroof keeps recording: its trace and report
hold the run. Why not hand the session over instead (stop nsroof's, let the script's run): trainers start
their profiler before the first step, so nsroof would keep only the set-up, and the user ran `nsroof profile`
for nsroof's report. A profiler started once nsroof's step window is recorded runs normally (the session is
free again).
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

#: the one guard in force (nsroof.profile sessions do not nest: a second one refuses to start)
_ACTIVE: Guard | None = None


@dataclass
class Guard:
    ours: Any  # the torch.autograd.profiler.profile that nsroof records with
    recording: Callable[[], bool]
    note: Callable[[str], None]  # told once, at the first profiler made inert
    starts: int = 0


def message(where: str) -> str:
    return (f"the script's own torch profiler (started at {where}) was made a no-op: nsroof's profiler "
            "records this run and torch runs one profiler at a time, so that one records nothing (empty "
            "results, no on_trace_ready call, empty exports); nsroof's trace holds the whole run")


def install(ours: Any, recording: Callable[[], bool], note: Callable[[str], None]) -> Callable[[], None]:
    """Intercept the starts of torch's profilers other than `ours` while `recording()`; returns the undo."""
    global _ACTIVE
    from torch.autograd import profiler as autograd_profiler
    from torch.profiler import profiler as torch_profiler

    session, kineto = autograd_profiler.profile, torch_profiler._KinetoProfile
    wrappers: list[tuple[Any, str, Callable[[Any], Any]]] = [
        (session, "_prepare_trace", _intercepting),
        (session, "_start_trace", _intercepting),
        # `with` looks __exit__ up before __enter__ swaps the class: the original's must see an inert one
        (session, "__exit__", lambda original: _inert_aware(original, _inert_exit)),
        # the wrapper of an inert session: no callback, and no metadata written into nsroof's trace
        (torch_profiler.profile, "_trace_ready", _skipped_when_inert),
        (kineto, "add_metadata", _skipped_when_inert),
        (kineto, "add_metadata_json", _skipped_when_inert),
    ]
    for name in ("emit_nvtx", "emit_itt"):
        ranges = getattr(autograd_profiler, name, None)
        wrappers += [(ranges, "__enter__", _intercepting_ranges),
                     (ranges, "__exit__", lambda original: _inert_aware(original, _inert_exit_ranges))]
    # what this torch defines (a method it lacks is not wrapped)
    saved = [(owner, attr, owner.__dict__[attr], wrap) for owner, attr, wrap in wrappers
             if isinstance(owner, type) and attr in owner.__dict__]
    for owner, attr, original, wrap in saved:
        setattr(owner, attr, wrap(original))
    previous, _ACTIVE = _ACTIVE, Guard(ours, recording, note)

    def undo() -> None:
        global _ACTIVE
        _ACTIVE = previous
        for owner, attr, original, _ in reversed(saved):
            setattr(owner, attr, original)
    return undo


def _intercepts(instance: Any) -> bool:
    guard = _ACTIVE
    return guard is not None and instance is not guard.ours and guard.recording()


def _intercepting(original: Callable[..., Any]) -> Callable[..., Any]:
    def start(self: Any, *args: Any, **kwargs: Any) -> Any:
        if _intercepts(self):
            _make_inert(self, _inert_session(type(self)))
            return None
        return original(self, *args, **kwargs)
    start.__wrapped__ = original  # type: ignore[attr-defined]
    return start


def _intercepting_ranges(original: Callable[..., Any]) -> Callable[..., Any]:
    def enter(self: Any) -> Any:
        if getattr(self, "enabled", True) and _intercepts(self):
            _make_inert(self, _inert_ranges(type(self)))
            return self
        return original(self)
    enter.__wrapped__ = original  # type: ignore[attr-defined]
    return enter


def _inert_aware(original: Callable[..., Any], inert: Callable[..., Any]) -> Callable[..., Any]:
    def exit_(self: Any, *exc: Any) -> Any:
        return inert(self, *exc) if type(self) in _INERT.values() else original(self, *exc)
    exit_.__wrapped__ = original  # type: ignore[attr-defined]
    return exit_


def _skipped_when_inert(original: Callable[..., Any]) -> Callable[..., Any]:
    def method(self: Any, *args: Any, **kwargs: Any) -> Any:
        if isinstance(getattr(self, "profiler", None), InertSession):
            return None
        return original(self, *args, **kwargs)
    method.__wrapped__ = original  # type: ignore[attr-defined]
    return method


def _make_inert(instance: Any, cls: type) -> None:
    instance.__class__ = cls
    instance.entered = True
    guard = _ACTIVE
    assert guard is not None
    guard.starts += 1
    if guard.starts == 1:
        guard.note(message(caller()))


def caller() -> str:
    """file:line of the first frame outside torch, nsroof and contextlib: where the script started it."""
    import torch

    inside = (str(Path(torch.__file__).parent) + os.sep, str(Path(__file__).parents[1]) + os.sep)
    frame = sys._getframe(1)
    while frame is not None:
        name = frame.f_code.co_filename
        if not name.startswith(inside) and Path(name).name != "contextlib.py":
            return f"{name}:{frame.f_lineno}"
        frame = frame.f_back  # type: ignore[assignment]
    return "an unknown place"


class InertSession:
    """Marks a torch.autograd.profiler.profile made a no-op (the classes below derive from it)."""


_INERT: dict[type, type] = {}


def _inert_session(base: type) -> type:
    if isinstance(base, type) and issubclass(base, InertSession):
        return base
    if base not in _INERT:
        _INERT[base] = type(f"Inert{base.__name__}", (InertSession, base), {
            "__module__": __name__,
            "_prepare_trace": _inert_prepare, "_start_trace": _inert_start, "__exit__": _inert_exit,
            "export_chrome_trace": _empty_chrome_trace,
        })
    return _INERT[base]


def _inert_ranges(base: type) -> type:
    if base not in _INERT:
        _INERT[base] = type(f"Inert{base.__name__}", (base,), {
            "__module__": __name__, "__enter__": _inert_enter, "__exit__": _inert_exit_ranges})
    return _INERT[base]


def _inert_prepare(self: Any) -> None:
    self.entered = True


def _inert_start(self: Any) -> None:
    self.entered = True


def _inert_exit(self: Any, *exc: Any) -> bool:
    """The stop of a session that never started: no results (an empty event list when read)."""
    self.kineto_results = None
    self._function_events = None
    self._needs_processing = True
    return False


def _inert_enter(self: Any) -> Any:
    self.entered = True
    return self


def _inert_exit_ranges(self: Any, *exc: Any) -> bool:
    return False


def _empty_chrome_trace(self: Any, path: Any, *args: Any, **kwargs: Any) -> None:
    """A chrome trace with no events, so a script that reads back its export goes on."""
    Path(path).write_text(json.dumps({"traceEvents": [], "displayTimeUnit": "ms"}), encoding="utf-8")
