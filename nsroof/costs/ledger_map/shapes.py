"""Where a ledger rule's `sizes[i][j]` come from: the emit_nvtx markers of an NVTX path
(`aten::addmm, seq = 5, op_id = 72, sizes = [[256], [64, 128], [128, 256]], ...`) or the report's
input_shapes column (torch.profiler traces)."""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from typing import Any

from nsroof.costs.ledger_map.rules import Rule, parse_expression

_MARKER = re.compile(
    r"(?P<op>[A-Za-z_][\w.:]*), seq = (?P<seq>\d+)(?:, op_id = (?P<op_id>\d+))?"
    r", sizes = (?P<sizes>\[(?:\s*\[[-\d,\s]*\]\s*,?)*\s*\])"
)
_BARE_MARKER = re.compile(r"([A-Za-z_][\w.:]*), seq = \d+")


@dataclass(frozen=True)
class Marker:
    op: str
    seq: int
    op_id: int | None
    sizes: list[list[int]]


def parse_markers(nvtx_path: str) -> list[Marker]:
    """Every emit_nvtx marker with recorded sizes in an NVTX path, outermost first."""
    out = []
    for m in _MARKER.finditer(nvtx_path or ""):
        try:
            sizes = ast.literal_eval(m.group("sizes"))
        except (ValueError, SyntaxError):
            continue
        out.append(Marker(m.group("op"), int(m.group("seq")),
                          int(m.group("op_id")) if m.group("op_id") else None,
                          [list(map(int, s)) for s in sizes]))
    return out


def parse_input_shapes(text: str) -> list[list[int]] | None:
    """torch.profiler's input_shapes string '[[64, 128], [128, 256], []]' -> lists; None when unreadable."""
    if not text or not isinstance(text, str):
        return None
    try:
        value = ast.literal_eval(text)
    except (ValueError, SyntaxError):
        return None
    if not isinstance(value, (list, tuple)):
        return None
    out = []
    for item in value:
        if isinstance(item, (list, tuple)) and all(isinstance(x, int) for x in item):
            out.append(list(item))
        else:
            out.append([])  # a scalar or a tensor list: no shape
    return out


def op_and_sizes(rule: Rule, nvtx_path: str, op: str,
                 input_shapes: str) -> tuple[str, list[list[int]] | None]:
    markers = parse_markers(nvtx_path)
    if rule.nvtx is not None:
        chosen = [mk for mk in markers if rule.nvtx.search(mk.op)] or markers
    else:
        chosen = markers
    if rule.op is not None:
        chosen = [mk for mk in chosen if rule.op.search(mk.op)] or chosen
    if chosen:
        innermost = chosen[-1]
        return innermost.op, innermost.sizes
    shapes = parse_input_shapes(input_shapes)
    if shapes is None and not op:
        # a marker without recorded sizes (emit_nvtx without record_shapes) still names the op
        bare = _BARE_MARKER.findall(nvtx_path or "")
        op = bare[-1] if bare else op
    return op, shapes


def size_value(name: str, value: Any, sizes: list[list[int]] | None) -> Any:
    """A shape parameter's value: a literal as is, a size expression on the recorded sizes. LookupError
    names the parameter, its expression and what the sizes lack."""
    if not (isinstance(value, str) and "sizes" in value):
        return value
    if sizes is None:
        raise LookupError(f"{name} = {value}: no recorded sizes (NVTX marker or input_shapes)")
    product = 1
    for factor in parse_expression(value):
        if isinstance(factor, int):
            product *= factor
            continue
        i, j = factor
        if not -len(sizes) <= i < len(sizes):
            raise LookupError(f"{name} = {value}: no input {i} in the recorded sizes {sizes} "
                              f"({len(sizes)} input(s))")
        if not -len(sizes[i]) <= j < len(sizes[i]):
            raise LookupError(f"{name} = {value}: input {i} of the recorded sizes {sizes} has no dimension "
                              f"{j}")
        product *= sizes[i][j]
    return product
