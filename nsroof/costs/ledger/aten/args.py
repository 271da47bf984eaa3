"""The shared vocabulary of the aten shape readers (nsroof.costs.ledger.aten): the recorded shapes, dtypes and
scalar arguments of one op call, the checks that turn a shape the formula cannot read into NaN with its
reason, the argument readers more than one op family uses, and the table of readers (one per aten op,
registered once, by the module of its op family)."""

from __future__ import annotations

import ast
import math
from collections.abc import Callable, Iterable, Sequence
from typing import Any

Shape = list[int]

# torch.profiler's dtype strings (c10 scalar type names) -> ledger dtype names.
TORCH_DTYPES: dict[str, str] = {
    "float": "fp32",
    "double": "fp64",
    "c10::Half": "fp16",
    "c10::BFloat16": "bf16",
    "c10::Float8_e4m3fn": "fp8",
    "c10::Float8_e5m2": "fp8",
    "long int": "int64",
    "int": "int32",
    "signed char": "int8",
    "unsigned char": "int8",
    "bool": "int8",
}


# c10::ScalarType codes an out_dtype argument records
SCALAR_TYPES = {5: "fp16", 6: "fp32", 7: "fp64", 15: "bf16", 23: "fp8", 24: "fp8", 25: "fp8", 26: "fp8"}

FLOATING = ("fp64", "fp32", "fp16", "bf16", "fp8")


def base_name(op: str) -> str:
    """'aten::add_' -> 'add'; 'aten::addmm' -> 'addmm' (in-place and out variants share a formula)."""
    name = op.split("::", 1)[1] if "::" in op else op
    name = name.split(".", 1)[0]
    if name.endswith("_") and not name.startswith("_"):
        name = name[:-1]
    return name


def numel(shape: Sequence[int]) -> int:
    return math.prod(int(s) for s in shape)


def dtype_of(dtypes: Sequence[str], i: int) -> str | None:
    if i >= len(dtypes):
        return None
    return TORCH_DTYPES.get(str(dtypes[i]))


def arg(concrete: Sequence[Any], i: int, default: Any = None) -> Any:
    if i < len(concrete) and concrete[i] is not None:
        return concrete[i]
    return default


class NoShape(Exception):
    """A formula could not read the shape it needs: becomes NaN with this message (prefixed by the op)."""


class Unrecorded(NoShape):
    """An argument the formula needs was not recorded: NaN with this message as is, so the reason reads the
    same for every op it hits (a report groups its missing texts)."""


NO_SHAPES = "no input shapes recorded (profile with record_shapes=True)"
CONV_ARGS_UNRECORDED = "conv stride/padding not recorded"


def concrete_values(concrete: Sequence[Any] | None) -> list[Any]:
    """The recorded scalar arguments as values: chrome traces write them as text ('[2, 2]', 'True', '1e-05',
    '' for a tensor argument); live events already hold values. Text that is no Python literal stays text."""
    out: list[Any] = []
    for value in concrete or []:
        if isinstance(value, str):
            text = value.strip()
            if not text:
                value = None
            else:
                try:
                    value = ast.literal_eval(text)
                except (ValueError, SyntaxError, MemoryError, RecursionError):
                    value = text
        out.append(value)
    return out


def recorded(c: Sequence[Any], i: int, what: str = CONV_ARGS_UNRECORDED) -> Any:
    """Argument i, which must have been recorded: no default is assumed in its place."""
    value = arg(c, i)
    if value is None:
        raise Unrecorded(what)
    return value


def need(cond: bool, why: str) -> None:
    if not cond:
        raise NoShape(why)


def square(value: Any, name: str) -> int:
    values = list(value) if isinstance(value, list | tuple) else [value]
    need(len(values) >= 1 and all(isinstance(v, int) and not isinstance(v, bool) for v in values),
         f"{name} {value!r} is not a list of integers")
    need(len(set(values)) == 1, f"the conv2d formula needs equal {name} on both axes, got {values}")
    return int(values[0])


def ledger_op(name: str, **shape: Any) -> Any:
    from nsroof.costs import ledger  # noqa: F401 - registers every formula
    from nsroof.costs.ledger.registry import operator

    return operator(name, **shape)


def move(n: int, reads: int, dt: str, what: str, other: float = 0.0, flops: float = 0.0) -> Any:
    return ledger_op("pointwise", n=max(n, 1), read_elements=reads, flops_per_element=flops, dtype=dt,
                     op=what, other_read_bytes=other)


# A reader takes one call's (shapes, dtypes, concrete) and returns a ledger Operator or raises NoShape.
Reader = Callable[[list[Shape], list[str], list[Any]], Any]


def broadcast(a: Sequence[int], b: Sequence[int]) -> list[int]:
    out: list[int] = []
    for i in range(1, max(len(a), len(b)) + 1):
        x = a[-i] if i <= len(a) else 1
        y = b[-i] if i <= len(b) else 1
        need(x == y or x == 1 or y == 1, f"shapes {list(a)} and {list(b)} do not broadcast")
        out.append(max(x, y))
    return out[::-1]


def need_dtype(t: Sequence[str], i: int) -> str:
    dt = dtype_of(t, i)
    need(dt is not None, f"input dtype {t[i] if i < len(t) else '(not recorded)'!r} has no byte size")
    assert dt is not None
    return dt


READERS: dict[str, Reader] = {}


def register_reader(names: Iterable[str], reader: Reader) -> None:
    """Map aten ops (base names, see `base_name`) to a shape reader. An op mapped twice is an error, as a
    formula registered twice is in the ledger registry: two readers for one op would make its cost depend
    on the order of this table."""
    from nsroof.costs.ledger.core import LedgerError

    for name in names:
        if name in READERS:
            raise LedgerError(f"aten op {name!r} already has a shape reader ({READERS[name].__qualname__})")
        READERS[name] = reader


