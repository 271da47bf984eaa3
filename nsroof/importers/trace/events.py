"""The declared schema of a kineto chrome trace: the typed structs msgspec decodes the fields nsroof reads
into (fields not declared are skipped, never turned into Python objects), and the one-line errors a field of
the wrong type gives, naming the file, the event and the field. Integers are 64-bit as kineto writes them:
a larger one (or a literal longer than any number) is such a one-line error too. nsroof.importers.trace.load
does the reading."""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Generic, TypeVar

import msgspec
from msgspec import Meta, Raw, Struct, field

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


# the categories nsroof reads (every other event is skipped as it is decoded)
ACTIVITY_CATS = ("kernel", "Kernel", "gpu_memcpy", "Memcpy", "gpu_memset", "Memset")  # 2021 traces capitalise
OP_CATS = ("cpu_op", "Operator")
ANNOTATION_CATS = ("user_annotation",)
LAUNCH_CATS = ("cuda_runtime", "cuda_driver", "Runtime")
RANGE_CAT = "cuda_profiler_range"


class LaunchArgs(Struct, frozen=True, gc=False):
    """The args nsroof reads of a runtime/driver event (None: absent)."""

    external_id: Int | None = field(default=None, name="External id")
    external_id_2021: Int | None = field(default=None, name="external id")  # 2021 traces' spelling
    correlation: Int | None = None
    graph_id: Int | None = field(default=None, name="graph id")
    graph_node_id: Int | None = field(default=None, name="graph node id")
    kernel: Any = None  # ROCm graph capture: the kernel a launch adds
    grid: Any = None  # ROCm: the launch's grid and block (graph capture matching only: read leniently)
    block: Any = None


class _ActivityFacts(Struct, frozen=True, gc=False):
    external_id: Int | None = field(default=None, name="External id")
    external_id_2021: Int | None = field(default=None, name="external id")
    correlation: Int | None = None
    graph_id: Int | None = field(default=None, name="graph id")
    graph_node_id: Int | None = field(default=None, name="graph node id")
    stream: Stream | None = None
    device: Int | None = None
    context: Int | None = None
    registers_per_thread: Number | None = field(default=None, name="registers per thread")
    shared_memory: Number | None = field(default=None, name="shared memory")


class ActivityArgs(_ActivityFacts, frozen=True, gc=False):
    """The args nsroof reads of a GPU activity (kernel, memcpy, memset)."""

    grid: Dim3 | None = None
    block: Dim3 | None = None


class OpExtras(Struct, frozen=True, gc=False):
    """The attributes few ops carry, passed on as given: Inductor's launch records' estimates and launch facts
    (triton_estimates.estimates, nsroof.costs.ledger.inductor_launch) and record_param_comms' message
    (nsroof.costs.ledger.collectives)."""

    kernel_backend: Any = None
    kernel_flop: Any = None
    kernel_num_gb: Any = None
    collective_name: Any = None
    in_msg_nelems: Any = None
    out_msg_nelems: Any = None
    dtype: Any = None
    group_size: Any = None
    kernel_kwargs: Any = None
    kernel_file: Any = None
    grid: Any = None


class OpArgs(Struct, frozen=True, gc=False):
    """The args nsroof reads of a CPU op or annotation (the loader merges the schemas' spellings: 'External
    id' or 2021's 'external id', 'Input Dims' or 2020's 'Input dims')."""

    external_id: Int | None = None
    sequence_number: Int | None = None
    fwd_thread_id: Int | None = None
    input_dims: Shapes | None = None
    input_type: Values | None = None
    concrete_inputs: Values | None = None
    extras: OpExtras | None = None  # None: none of them (most ops)

    @property
    def kernel_backend(self) -> Any:
        return self.extras.kernel_backend if self.extras is not None else None

    @property
    def kernel_flop(self) -> Any:
        return self.extras.kernel_flop if self.extras is not None else None

    @property
    def kernel_num_gb(self) -> Any:
        return self.extras.kernel_num_gb if self.extras is not None else None


class WireActivityArgs(_ActivityFacts, frozen=True, gc=False):
    """ActivityArgs as decoded: grid and block as their JSON text, decoded once per distinct text."""

    grid: Raw = Raw()
    block: Raw = Raw()


class WireOpArgs(Struct, gc=False):
    """OpArgs as decoded: the inputs' shapes, types and values as their JSON text, decoded once per distinct
    text (a training step repeats the same few thousand signatures)."""

    external_id: Int | None = field(default=None, name="External id")
    external_id_2021: Int | None = field(default=None, name="external id")
    sequence_number: Int | None = field(default=None, name="Sequence number")
    fwd_thread_id: Int | None = field(default=None, name="Fwd thread id")
    input_dims: Raw = field(default=Raw(), name="Input Dims")
    input_dims_2020: Raw = field(default=Raw(), name="Input dims")  # the 2020 schema's spelling
    input_type: Raw = field(default=Raw(), name="Input type")
    concrete_inputs: Raw = field(default=Raw(), name="Concrete Inputs")
    kernel_backend: Any = None
    kernel_flop: Any = None
    kernel_num_gb: Any = None
    collective_name: Any = field(default=None, name="Collective name")
    in_msg_nelems: Any = field(default=None, name="In msg nelems")
    out_msg_nelems: Any = field(default=None, name="Out msg nelems")
    dtype: Any = None
    group_size: Any = field(default=None, name="Group size")
    kernel_kwargs: Any = None
    kernel_file: Any = None
    grid: Any = None  # an Inductor launch's grid call in PyTorch ≤ 2.5 ('grid(100,)': its numels)


A = TypeVar("A", LaunchArgs, ActivityArgs, OpArgs)


class Event(Struct, Generic[A], gc=False):
    """A complete ('X') event of a category nsroof reads."""

    name: str
    cat: str
    ts: float | None  # µs; None: a non-finite number (load)
    dur: float | None
    pid: int | str | None
    tid: int | str | None
    args: A


Activity = Event[ActivityArgs]
Launch = Event[LaunchArgs]
Op = Event[OpArgs]
NO_OP_ARGS, NO_LAUNCH_ARGS, NO_ACTIVITY_ARGS = OpArgs(), LaunchArgs(), ActivityArgs()  # events without args
COMMS_ATTRIBUTES = {"Collective name": "collective_name", "In msg nelems": "in_msg_nelems",
                    "Out msg nelems": "out_msg_nelems", "dtype": "dtype", "Group size": "group_size"}


class WireEvent(Struct, gc=False):
    """An event as decoded: its args as their JSON text, decoded by the category's type (or skipped)."""

    name: str = ""
    cat: str = ""
    ph: str = "X"
    # decoded as floats (exact to 2**53 µs, 285 years): one object shared with the op tree's spans
    ts: float | None = math.nan  # None: a NaN the standard parser read (see load)
    dur: float | None = math.nan
    pid: Id | None = None
    tid: Id | None = None
    args: Raw = Raw()


class Device(Struct, gc=False):
    id: Int | None = None
    name: str = ""
    computeMajor: Int | None = None
    computeMinor: Int | None = None
    # what tells GPUs of one name (or of none) apart (nsroof.roofs.gpu_identity); Any: a value of another
    # type is a fact not recorded, never a refused trace
    numSms: Any = None
    totalGlobalMem: Any = None
    warpSize: Any = None


class Trace(Struct, gc=False):
    """The top-level facts of a trace (its events are TraceEvents')."""

    deviceProperties: list[Device] | None = None
    nsroof: dict[str, Any] | None = None
    distributedInfo: Any = None
    platform: str = ""  # 'rocm' (roctracer / HIP versions recorded), 'cuda' (CUPTI / CUDA versions) or ''


class WireTrace(Struct, gc=False):
    traceEvents: list[Raw]
    deviceProperties: list[Device] | None = None
    nsroof: dict[str, Any] | None = None
    distributedInfo: Any = None
    roctracer_version: Any = None
    hip_runtime_version: Any = None
    cupti_version: Any = None
    cuda_runtime_version: Any = None

    @property
    def platform(self) -> str:
        if self.roctracer_version is not None or self.hip_runtime_version is not None:
            return "rocm"
        return "cuda" if self.cupti_version is not None or self.cuda_runtime_version is not None else ""


class RangeEvent(Struct, gc=False):
    """A CUPTI range-profiler event: its counters are args of any name (read for those traces only)."""

    name: str = ""
    cat: str = ""
    ts: Number = math.nan
    pid: Id | None = None
    args: dict[str, Any] = {}


class RangeTrace(Struct, gc=False):
    traceEvents: list[RangeEvent]


@dataclass
class TraceEvents:
    """The events of a trace nsroof reads, by category group, each in file order within a category and the
    categories in the order of the *_CATS tuples."""

    top: Trace
    activities: list[Activity]
    launches: list[Launch]
    ops: list[Op]
    annotations: list[Op]
    ranges: int  # CUPTI range-profiler events (load_ranges reads their counters)


def comms_attributes(args: OpArgs) -> dict[str, Any]:
    """A record_param_comms op's attributes under the trace's names (those it has)."""
    extras = args.extras
    return {} if extras is None else {
        key: value for key, attr in COMMS_ATTRIBUTES.items() if (value := getattr(extras, attr)) is not None}


# An Inductor Triton launch's attributes the costing reads (nsroof.costs.ledger.inductor_launch)
TRITON_ATTRIBUTES = ("kernel_flop", "kernel_num_gb", "kernel_kwargs", "kernel_file", "grid")


def triton_attributes(args: OpArgs) -> dict[str, Any]:
    """An Inductor Triton launch record's attributes (those it has); {} for any other op."""
    extras = args.extras
    if extras is None or extras.kernel_backend != "triton":
        return {}
    return {key: value for key in TRITON_ATTRIBUTES if (value := getattr(extras, key)) is not None}


def mixed_shapes(dims: list[Any]) -> bool:
    """An Input Dims entry mixing a shape's integers with a tensor list's shapes ([[], 16]): no tensor."""
    # the entries' types as a set, built in C: 0.11 -> 0.08 s over a 140 MB trace's 183k Input Dims
    for x in dims:
        if x and (kinds := set(map(type, x))) != _INTS and kinds != _LISTS:
            return True
    return False


_INTS, _LISTS = {int}, {list}  # a shape's entries; a tensor list's


# --------------------------------------------------------------------------- the one-line errors

_EXPECTED = {"ts": "a number", "dur": "a number", "pid": "an integer or a string",
             "tid": "an integer or a string",
             "name": "a string", "cat": "a string", "ph": "a string", "args": "an object",
             "stream": "an integer or a string", "grid": "a list of 3 numbers",
             "block": "a list of 3 numbers",
             "registers per thread": "a number", "shared memory": "a number",
             "Input Dims": "a list of shapes (lists of integers) or of shape lists",
             "Input dims": "a list of shapes (lists of integers) or of shape lists",
             "Input type": "a list of values", "Concrete Inputs": "a list of values"}
_PATH = re.compile(r"^(?P<where>(?:traceEvents|deviceProperties)\[\d+\])(?P<args>\.args)?"
                   r"(?:\.(?P<key>[^.\[]+))?")
HINT = "the file is not a torch.profiler trace as written by export_chrome_trace()"


def _type_name(v: Any) -> str:
    if isinstance(v, int) and not isinstance(v, bool) and not -INT64 <= v < INT64:
        return f"an integer of {len(str(abs(v)))} digits (beyond 64 bits)"
    if isinstance(v, list | dict):
        return (f"a {type(v).__name__} nested too deeply or holding other types" if v
                else f"an empty {type(v).__name__}")
    return f"{type(v).__name__} {json.dumps(v)[:40]}"


def _lookup(doc: Any, path: str) -> Any:
    """The value at a msgspec error path ('traceEvents[3].args.External id'), or a reason it is not there."""
    value = doc
    for name, index in re.findall(r"\.?([^.\[\]]+)|\[(\d+)\]", path):
        value = value[int(index)] if index else value[name]
    return value


def validation_error(p: Path, exc: msgspec.ValidationError, document: Any, *, event: int | None = None,
                     stage: str = "") -> InputError:
    """msgspec's 'Expected `int`, got `str` - at `$.traceEvents[3].ts`' as nsroof's one line; `document`: the
    standard parser's reading of what was decoded, for the value's description. `event`: the index of the
    event that was decoded alone (`document` is that event), `stage` the part of it the error is in
    ('.args', '.args.Input Dims')."""
    message, _, at = str(exc).rpartition(" - at `$")
    if not message:  # an error at the root of what was decoded
        message, at = str(exc), ""
    at = at.rstrip("`")
    if event is None:
        path = at.lstrip(".")
    else:
        path, document = f"traceEvents[{event}]{stage}{at}", {"traceEvents": {event: document}}
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
        return InputError(p,
                          f"{'top-level ' if path == META_KEY else ''}{path!r} is {got}, expected {expected}")
    where, key = m.group("where") + (m.group("args") or ""), m.group("key")
    if key is None and m.group("args"):  # the args themselves
        where, key = m.group("where"), "args"
    if key is None:
        thing = "an event object" if where.startswith("traceEvents") else "an object"
        return InputError(p, f"{where} is {got}, expected {thing}", hint=HINT)
    expected = _EXPECTED.get(key, "an integer")
    return InputError(p, f"{where}: field {key!r} is {got}, expected {expected}", hint=HINT)
