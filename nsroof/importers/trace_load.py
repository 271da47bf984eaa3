"""Loading a kineto chrome trace (.json, .json.gz): the text parsed, then every field nsroof reads checked
against its declared type, so a wrong type is one line naming the file, the event and the field rather than
a TypeError deep in the correlation. Fields not declared here are never read. Integers are 64-bit as kineto
writes them: a larger one (or a literal longer than Python converts) is such a one-line error too.
"""

from __future__ import annotations

import gc
import gzip
import json
import os
import zlib
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeGuard

from nsroof.errors import InputError

META_KEY = "nsroof"  # the top-level key nsroof.profile writes (prof.add_metadata_json)


# --------------------------------------------------------------------------- the declared event schema
# Checked at the door, so a wrong type is one line naming the file, the event and the field rather than a
# TypeError deep in the correlation. Fields not declared here are never read.


INT64 = 1 << 63  # kineto writes 64-bit integers; a larger one cannot be an id, a count or a time


def _is_int(v: Any) -> TypeGuard[int]:
    return isinstance(v, int) and not isinstance(v, bool) and -INT64 <= v < INT64


def _is_number(v: Any) -> bool:
    return _is_int(v) or isinstance(v, float)


def _is_stream(v: Any) -> bool:
    """A stream as CUDA traces write it (an integer) or ROCm ones (a string: "0x0", "stream 7")."""
    return _is_int(v) or isinstance(v, str)


def _is_shape(v: Any) -> bool:
    """One tensor's Input Dims entry: a list of integers ([] for a scalar or a non-tensor argument)."""
    return isinstance(v, list) and all(_is_int(s) for s in v)


def _nested(v: Any, leaf: Callable[[Any], bool], depth: int) -> bool:
    """v is a list nested at most `depth` levels whose leaves pass `leaf` (iterative: never recurses)."""
    todo = [(v, depth)]
    while todo:
        x, d = todo.pop()
        if isinstance(x, list):
            if d == 0:
                return False
            todo.extend((y, d - 1) for y in x)
        elif not leaf(x):
            return False
    return True


def _scalar(v: Any) -> bool:
    return v is None or isinstance(v, str | float) or _is_int(v)


CHECKS: dict[str, tuple[Callable[[Any], bool], str]] = {
    "text": (lambda v: isinstance(v, str), "a string"),
    "number": (_is_number, "a number"),
    "int": (_is_int, "an integer"),
    "stream": (_is_stream, "an integer or a string"),
    "id": (lambda v: _is_int(v) or isinstance(v, str), "an integer or a string"),
    "object": (lambda v: isinstance(v, dict), "an object"),
    # a kernel's grid is [x, y, z]; a Triton launch op records its grid as text ("grid(100,)")
    "dim3": (lambda v: isinstance(v, str) or (isinstance(v, list) and len(v) == 3 and all(_is_number(x) for x in v)),
             "a list of 3 numbers"),
    # tensor lists give a list of shapes per input: 3 levels at most
    "shapes": (lambda v: isinstance(v, list) and all(_is_shape(x) or (isinstance(x, list) and all(map(_is_shape, x)))
                                                     for x in v),
               "a list of shapes (lists of integers) or of shape lists"),
    "values": (lambda v: isinstance(v, list) and _nested(v, _scalar, 3), "a list of values"),
}
EVENT_FIELDS: dict[str, str] = {"name": "text", "cat": "text", "ph": "text", "ts": "number", "dur": "number",
                                "pid": "id", "tid": "id", "args": "object"}
ARG_FIELDS: dict[str, str] = {
    "External id": "int", "external id": "int", "correlation": "int", "Sequence number": "int",
    "Fwd thread id": "int", "stream": "stream", "device": "int", "context": "int", "grid": "dim3", "block": "dim3",
    "registers per thread": "number", "shared memory": "number", "Input Dims": "shapes", "Input dims": "shapes",
    "Input type": "values", "graph id": "int", "graph node id": "int",
    "Concrete Inputs": "values",
}
DEVICE_FIELDS: dict[str, str] = {"id": "int", "name": "text", "computeMajor": "int", "computeMinor": "int"}


def _check(p: Path, where: str | int, obj: dict[str, Any], fields: dict[str, str], suffix: str = "") -> None:
    """Every declared field obj has, against its type. `where` is a name or an event index (the message
    is built only on failure: this runs for every event)."""
    for key in fields.keys() & obj.keys():
        ok, expected = CHECKS[fields[key]]
        if not ok(obj[key]):
            place = f"traceEvents[{where}]{suffix}" if isinstance(where, int) else where
            raise InputError(p, f"{place}: field {key!r} is {_type_name(obj[key])}, expected {expected}",
                             hint="the file is not a torch.profiler trace as written by export_chrome_trace()")


def _type_name(v: Any) -> str:
    if isinstance(v, int) and not isinstance(v, bool) and not _is_int(v):
        return f"an integer of {len(str(abs(v)))} digits (beyond 64 bits)"
    if isinstance(v, list | dict):
        return f"a {type(v).__name__} nested too deeply or holding other types" if v else f"an empty {type(v).__name__}"
    return f"{type(v).__name__} {json.dumps(v)[:40]}"


def validate(p: Path, top: dict[str, Any], events: list[Any]) -> None:
    """The declared types of every field nsroof reads; InputError naming the event index and field."""
    devices = top.get("deviceProperties")
    if devices is not None:
        if not isinstance(devices, list):
            raise InputError(p, f"'deviceProperties' is {_type_name(devices)}, expected a list of objects")
        for k, d in enumerate(devices):
            if not isinstance(d, dict):
                raise InputError(p, f"deviceProperties[{k}] is {_type_name(d)}, expected an object")
            _check(p, f"deviceProperties[{k}]", d, DEVICE_FIELDS)
    if META_KEY in top and not isinstance(top[META_KEY], dict):
        raise InputError(p, f"top-level {META_KEY!r} is {_type_name(top[META_KEY])}, expected an object")
    for k, e in enumerate(events):
        if not isinstance(e, dict):
            raise InputError(p, f"traceEvents[{k}] is {_type_name(e)}, expected an event object")
        _check(p, k, e, EVENT_FIELDS)
        args = e.get("args")
        if args:
            _check(p, k, args, ARG_FIELDS, ".args")


# --------------------------------------------------------------------------- loading


@contextmanager
def paused_gc() -> Iterator[None]:
    """The cyclic collector paused while a trace becomes millions of small objects (none of them cyclic
    garbage): its passes over the growing heap cost about a sixth of an import (7.2 s -> 6.0 s on a 35 MB
    trace). Restored as it was, whatever happens."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def load_events(path: str | os.PathLike[str]) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """(top-level object, traceEvents) of a chrome trace, plain or gzip, checked against the declared
    schema; InputError on anything else."""
    p = Path(path)
    try:
        with open(p, "rb") as fh:
            raw = fh.read()
        if raw[:2] == b"\x1f\x8b":
            raw = gzip.decompress(raw)
        text = raw.decode("utf-8-sig")
    except (OSError, EOFError, zlib.error) as exc:
        raise InputError(p, f"cannot read the trace ({exc or type(exc).__name__})",
                         hint="pass a torch.profiler chrome trace (.json or .json.gz); re-compress a damaged .gz") from None
    except UnicodeDecodeError as exc:
        raise InputError(p, f"not UTF-8 text ({exc.reason} at byte {exc.start})",
                         hint="pass a torch.profiler chrome trace (.json or .json.gz)") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise InputError(p, f"not valid JSON ({exc.msg})", line=exc.lineno,
                         hint="the trace may be truncated: re-export it with prof.export_chrome_trace()") from None
    except RecursionError:
        raise InputError(p, "JSON nested deeper than any chrome trace (refused, not parsed)",
                         hint="pass a torch.profiler chrome trace") from None
    except ValueError as exc:  # an integer literal of more digits than Python converts (sys.int_info)
        raise InputError(p, f"a number no chrome trace holds ({str(exc).split(';')[0]})",
                         hint="the file is not a torch.profiler trace as written by export_chrome_trace()") from None
    if isinstance(data, list):
        top: dict[str, Any] = {}
        events: list[Any] = data
    elif isinstance(data, dict) and isinstance(data.get("traceEvents"), list):
        top, events = data, data["traceEvents"]
    else:
        raise InputError(p, "JSON without a 'traceEvents' list: not a chrome trace",
                         hint="pass a torch.profiler trace written by export_chrome_trace()")
    validate(p, top, events)
    return top, events
