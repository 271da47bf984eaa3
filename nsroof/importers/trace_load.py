"""Loading a kineto chrome trace (.json, .json.gz): decoded in one pass by msgspec into the typed structs
below, which are the declared schema of every field nsroof reads. Fields not declared here are skipped by the
decoder (never turned into Python objects); a declared field of the wrong type is one line naming the file,
the event and the field rather than a TypeError deep in the correlation. Integers are 64-bit as kineto
writes them: a larger one (or a literal longer than any number) is such a one-line error too.

Text the strict decoder refuses (a JSON error, the NaN / Infinity tokens Python's json module writes, bytes
that are not UTF-8) goes through the standard library's parser, which names the line of a real error, and
its objects are converted to the same structs (msgspec.convert: the same declaration, the same checks).
"""

from __future__ import annotations

import gc
import gzip
import json
import math
import os
import re
import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from functools import cache
from pathlib import Path
from typing import Annotated, Any

import msgspec
from msgspec import Meta, Struct, field

from nsroof.errors import InputError

META_KEY = "nsroof"  # the top-level key nsroof.profile writes (prof.add_metadata_json)
INT64 = 1 << 63  # kineto writes 64-bit integers; a larger one cannot be an id, a count or a time

# --------------------------------------------------------------------------- the declared event schema

Int = Annotated[int, Meta(ge=-INT64, le=INT64 - 1)]
Number = Int | float
Id = Int | str  # pid / tid: integers, or names ("Spans", "stream 7") in some traces
Stream = Int | str  # CUDA writes an integer, ROCm a string ("0x0")
Dim3 = Annotated[list[Number], Meta(min_length=3, max_length=3)] | str  # Triton launch ops: "grid(100,)"
# one tensor's shape, or a tensor list's shapes (checked whole by mixed_shapes: msgspec takes one list type)
Shapes = list[list[Int | list[Int]]]
Scalar = None | str | Int | float
Values = list[Scalar | list[Scalar | list[Scalar]]]  # 3 levels of lists at most


class Args(Struct, frozen=True, gc=False):
    """The args of an event nsroof reads (None: absent); the attributes nsroof passes on as given are Any."""

    external_id: Int | None = field(default=None, name="External id")
    external_id_2021: Int | None = field(default=None, name="external id")  # 2021 traces' spelling
    correlation: Int | None = None
    sequence_number: Int | None = field(default=None, name="Sequence number")
    fwd_thread_id: Int | None = field(default=None, name="Fwd thread id")
    stream: Stream | None = None
    device: Int | None = None
    context: Int | None = None
    grid: Dim3 | None = None
    block: Dim3 | None = None
    registers_per_thread: Number | None = field(default=None, name="registers per thread")
    shared_memory: Number | None = field(default=None, name="shared memory")
    input_dims: Shapes | None = field(default=None, name="Input Dims")
    input_dims_2020: Shapes | None = field(default=None, name="Input dims")  # the 2020 schema's spelling
    input_type: Values | None = field(default=None, name="Input type")
    concrete_inputs: Values | None = field(default=None, name="Concrete Inputs")
    graph_id: Int | None = field(default=None, name="graph id")
    graph_node_id: Int | None = field(default=None, name="graph node id")
    kernel: Any = None  # ROCm graph capture: the kernel a launch adds
    # Inductor's launch records (torch_trace.inductor_estimates)
    kernel_backend: Any = None
    kernel_flop: Any = None
    kernel_num_gb: Any = None
    # record_param_comms (nsroof.models.ledger.collectives reads them as given)
    collective_name: Any = field(default=None, name="Collective name")
    in_msg_nelems: Any = field(default=None, name="In msg nelems")
    out_msg_nelems: Any = field(default=None, name="Out msg nelems")
    dtype: Any = None
    group_size: Any = field(default=None, name="Group size")


NO_ARGS = Args()
COMMS_ATTRIBUTES = {"Collective name": "collective_name", "In msg nelems": "in_msg_nelems",
                    "Out msg nelems": "out_msg_nelems", "dtype": "dtype", "Group size": "group_size"}


class Event(Struct, gc=False):
    name: str = ""
    cat: str = ""
    ph: str = "X"
    ts: Number = math.nan
    dur: Number = math.nan
    pid: Id | None = None
    tid: Id | None = None
    args: Args = NO_ARGS


class Device(Struct, gc=False):
    id: Int | None = None
    name: str = ""
    computeMajor: Int | None = None
    computeMinor: Int | None = None


class Trace(Struct, gc=False):
    traceEvents: list[Event]
    deviceProperties: list[Device] | None = None
    nsroof: dict[str, Any] | None = None
    distributedInfo: Any = None


class RangeEvent(Struct, gc=False):
    """A CUPTI range-profiler event: its counters are args of any name (read for those traces only)."""

    name: str = ""
    cat: str = ""
    ts: Number = math.nan
    pid: Id | None = None
    args: dict[str, Any] = {}


class RangeTrace(Struct, gc=False):
    traceEvents: list[RangeEvent]


def comms_attributes(args: Args) -> dict[str, Any]:
    """A record_param_comms op's attributes under the trace's names (those it has)."""
    return {key: value for key, attr in COMMS_ATTRIBUTES.items() if (value := getattr(args, attr)) is not None}


def mixed_shapes(dims: list[Any]) -> bool:
    """An Input Dims entry mixing a shape's integers with a tensor list's shapes ([[], 16]): no tensor."""
    for x in dims:  # the entries' types as a set, built in C: 0.11 -> 0.08 s over a 140 MB trace's 183k Input Dims
        if x and (kinds := set(map(type, x))) != _INTS and kinds != _LISTS:
            return True
    return False


_INTS, _LISTS = {int}, {list}  # a shape's entries; a tensor list's


# --------------------------------------------------------------------------- the one-line errors

_EXPECTED = {"ts": "a number", "dur": "a number", "pid": "an integer or a string", "tid": "an integer or a string",
             "name": "a string", "cat": "a string", "ph": "a string", "args": "an object",
             "stream": "an integer or a string", "grid": "a list of 3 numbers", "block": "a list of 3 numbers",
             "registers per thread": "a number", "shared memory": "a number",
             "Input Dims": "a list of shapes (lists of integers) or of shape lists",
             "Input dims": "a list of shapes (lists of integers) or of shape lists",
             "Input type": "a list of values", "Concrete Inputs": "a list of values"}
_PATH = re.compile(r"^(?P<where>(?:traceEvents|deviceProperties)\[\d+\])(?P<args>\.args)?(?:\.(?P<key>[^.\[]+))?")
_HINT = "the file is not a torch.profiler trace as written by export_chrome_trace()"


def _type_name(v: Any) -> str:
    if isinstance(v, int) and not isinstance(v, bool) and not -INT64 <= v < INT64:
        return f"an integer of {len(str(abs(v)))} digits (beyond 64 bits)"
    if isinstance(v, list | dict):
        return f"a {type(v).__name__} nested too deeply or holding other types" if v else f"an empty {type(v).__name__}"
    return f"{type(v).__name__} {json.dumps(v)[:40]}"


def _lookup(doc: Any, path: str) -> Any:
    """The value at a msgspec error path ('traceEvents[3].args.External id'), or a reason it is not there."""
    value = doc
    for name, index in re.findall(r"\.?([^.\[\]]+)|\[(\d+)\]", path):
        value = value[int(index)] if index else value[name]
    return value


def _validation_error(p: Path, exc: msgspec.ValidationError, document: Any) -> InputError:
    """msgspec's 'Expected `int`, got `str` - at `$.traceEvents[3].ts`' as nsroof's one line."""
    message, _, at = str(exc).rpartition(" - at `$")
    path = at.rstrip("`").lstrip(".")
    m = _PATH.match(path)
    if not path or path == "traceEvents" or message.startswith("Object missing required field"):
        return InputError(p, "JSON without a 'traceEvents' list: not a chrome trace",
                          hint="pass a torch.profiler trace written by export_chrome_trace()")
    try:
        value: Any = _lookup(document, m.group(0) if m else path)
        got = _type_name(value)
    except (KeyError, IndexError, TypeError):
        got = message
    if m is None:  # a top-level key of the wrong type
        expected = "an object" if path == META_KEY else "a list of objects"
        return InputError(p, f"{'top-level ' if path == META_KEY else ''}{path!r} is {got}, expected {expected}")
    where, key = m.group("where") + (m.group("args") or ""), m.group("key")
    if key is None and m.group("args"):  # the args themselves
        where, key = m.group("where"), "args"
    if key is None:
        thing = "an event object" if where.startswith("traceEvents") else "an object"
        return InputError(p, f"{where} is {got}, expected {thing}", hint=_HINT)
    expected = _EXPECTED.get(key, "an integer")
    return InputError(p, f"{where}: field {key!r} is {got}, expected {expected}", hint=_HINT)


# --------------------------------------------------------------------------- loading


@cache
def _decoder() -> msgspec.json.Decoder[Trace | list[Event]]:
    return msgspec.json.Decoder(Trace | list[Event])  # type: ignore[arg-type]


@contextmanager
def paused_gc() -> Iterator[None]:
    """The cyclic collector paused while a trace becomes many small objects (none of them cyclic garbage):
    its passes over the growing heap would cost a sixth of an import. Restored as it was, whatever happens."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def read_bytes(p: Path) -> bytes | bytearray:
    """The file's bytes, a gzip stream decompressed in pieces (no second copy of the compressed file)."""
    try:
        with open(p, "rb") as fh:
            magic = fh.read(2)
            fh.seek(0)
            if magic != b"\x1f\x8b":
                return fh.read()
            out = bytearray()
            with gzip.GzipFile(fileobj=fh) as gz:
                while chunk := gz.read(1 << 24):
                    out += chunk
            return out
    except (OSError, EOFError, zlib.error) as exc:
        raise InputError(p, f"cannot read the trace ({exc or type(exc).__name__})",
                         hint="pass a torch.profiler chrome trace (.json or .json.gz); re-compress a damaged .gz") from None


def _standard_parse(p: Path, raw: bytes | bytearray) -> Any:
    """The standard library's reading of text msgspec refused: its error names the line."""
    try:
        text = bytes(raw).decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise InputError(p, f"not UTF-8 text ({exc.reason} at byte {exc.start})",
                         hint="pass a torch.profiler chrome trace (.json or .json.gz)") from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise InputError(p, f"not valid JSON ({exc.msg})", line=exc.lineno,
                         hint="the trace may be truncated: re-export it with prof.export_chrome_trace()") from None
    except RecursionError:
        raise _too_deep(p) from None
    except ValueError as exc:  # an integer literal of more digits than Python converts (sys.int_info)
        raise InputError(p, f"a number no chrome trace holds ({str(exc).split(';')[0]})", hint=_HINT) from None


def _too_deep(p: Path) -> InputError:
    return InputError(p, "JSON nested deeper than any chrome trace (refused, not parsed)",
                      hint="pass a torch.profiler chrome trace")


def _typed(p: Path, raw: bytes | bytearray) -> Trace | list[Event]:
    body = memoryview(raw)[3:] if raw[:3] == b"\xef\xbb\xbf" else raw
    try:
        return _decoder().decode(body)  # type: ignore[no-any-return]
    except msgspec.ValidationError as exc:
        if "out of range" in str(exc):
            raise InputError(p, f"a number no chrome trace holds ({str(exc).split(' - ')[0]})", hint=_HINT) from None
        raise _validation_error(p, exc, _standard_parse(p, raw)) from None
    except RecursionError:
        raise _too_deep(p) from None
    except msgspec.DecodeError:
        doc = _standard_parse(p, raw)  # raises what is wrong; returns what the strict decoder refused (NaN)
    try:
        return msgspec.convert(doc, Trace | list[Event])  # type: ignore[arg-type]
    except msgspec.ValidationError as exc:
        raise _validation_error(p, exc, doc) from None


def load_events(path: str | os.PathLike[str]) -> tuple[Trace, list[Event]]:
    """(top-level object, traceEvents) of a chrome trace, plain or gzip, decoded into the declared schema;
    InputError on anything else."""
    p = Path(path)
    decoded = _typed(p, read_bytes(p))
    top = decoded if isinstance(decoded, Trace) else Trace(traceEvents=decoded)
    for k, e in enumerate(top.traceEvents):
        dims = e.args.input_dims if e.args.input_dims is not None else e.args.input_dims_2020
        if dims is not None and mixed_shapes(dims):
            key = "Input Dims" if e.args.input_dims is not None else "Input dims"
            raise InputError(p, f"traceEvents[{k}].args: field {key!r} is a list mixing shapes and integers, "
                                "expected a list of shapes (lists of integers) or of shape lists", hint=_HINT)
    return top, top.traceEvents


def load_ranges(path: str | os.PathLike[str]) -> list[RangeEvent]:
    """The CUPTI range-profiler events of a trace with every arg (their counters): read again, for the
    traces that have them (load_events checked the file)."""
    p = Path(path)
    raw = read_bytes(p)
    body = memoryview(raw)[3:] if raw[:3] == b"\xef\xbb\xbf" else raw
    try:
        decoded = msgspec.json.decode(body, type=RangeTrace | list[RangeEvent])
    except msgspec.DecodeError:
        decoded = msgspec.convert(_standard_parse(p, raw), RangeTrace | list[RangeEvent])  # type: ignore[arg-type]
    events = decoded.traceEvents if isinstance(decoded, RangeTrace) else decoded
    return [e for e in events if e.cat == "cuda_profiler_range"]
