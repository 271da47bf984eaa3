"""NVTX ranges from ncu's CSV columns (Nsight Compute CLI docs: --nvtx, --print-nvtx-rename).

Push/pop column `thread Domain:Push/Pop_Range:PL_Type:PL_Value:CLR_Type:Color:Msg_Type:Msg` (or the
shorter `thread Domain:Push/Pop_Range`), cell after CSV unquoting:

    21096  "<default domain>:model.forward:none:none:none:none:none:none"  "nsroof:layer0:none:..."

one quoted token per stack level, bottom (outermost) first, every domain of the thread concatenated.
Start/end column `Id:Domain:Start/Stop_Range:...`: ` "100:nsroof:step0:none:..." `.

A token is `<domain>:<name>:<6 attribute fields>`; names contain `:` and `,` (emit_nvtx writes
`aten::addmm, seq = 5, op_id = 72, sizes = ...`), so the domain is split off the left once and the six
attribute fields off the right. ncu does not escape `"` inside names; `split_tokens` tolerates single
quotes inside a token (only `"` followed by whitespace-then-`"` or the end closes it).

The flat list a kernel gets is every push/pop range (domains in the order ncu prints them, each bottom
first), then the start/end ranges: the same order nsroof.importers.ncu.rep uses.
"""

from __future__ import annotations

import functools
import itertools
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

PUSH_POP_PREFIX = "thread Domain:Push/Pop_Range"
#: a step range: torch.profiler's `ProfilerStep#3`, or `step 3` / `step_3` / `step#3` as scripts name them
STEP_RANGE = re.compile(r"^(?P<stem>ProfilerStep#|step[ _#-]?)(?P<n>\d+)$", re.IGNORECASE)
START_END_PREFIX = "Id:Domain:Start/Stop_Range"
DEFAULT_DOMAIN = "<default domain>"

# A token: a quote, then anything up to the first quote that is followed by whitespace and another token
# or by the end of the cell, so a stray `"` inside a name does not end the token early. Written as runs
# of non-quotes, each quote inside checked once (the lazy `"(.*?)"(?=...)` tried the lookahead at every
# character: 3x slower on emit_nvtx cells; tests/names/test_nvtx.py holds the two equal).
_TOKEN = re.compile(r'"([^"]*(?:"(?!\s+"|\s*$)[^"]*)*)"(?=\s+"|\s*$)')


@dataclass(frozen=True)
class NvtxRange:
    domain: str
    name: str
    kind: str  # "push_pop" or "start_end"


def is_push_pop_column(name: str) -> bool:
    return name.startswith(PUSH_POP_PREFIX)


def is_start_end_column(name: str) -> bool:
    return name.startswith(START_END_PREFIX)


def split_tokens(cell: str) -> list[str]:
    """The quoted tokens of one NVTX cell (the leading thread id / trailing spaces dropped)."""
    text = cell.strip()
    if not text:
        return []
    first = text.find('"')
    if first < 0:
        return []
    return _TOKEN.findall(text[first:])


_NO_ATTRIBUTES = ":none:none:none:none:none:none"


def _name_of(rest: str) -> str:
    """`<name>:<PL_Type>:<PL_Value>:<CLR_Type>:<Color>:<Msg_Type>:<Msg>` -> name.

    Both the name and Msg may hold `:`. Without attributes the six fields are `none`. With them, Msg
    is the range's message, which is what ncu shows as the range's name (the text page prints it
    alone), so the split where the name equals Msg is the one; failing that, the last six `:` fields."""
    if rest.endswith(_NO_ATTRIBUTES):
        return rest[: -len(_NO_ATTRIBUTES)]
    parts = rest.split(":")
    for k in range(1, len(parts) - 5):  # name = parts[:k], five fields, Msg = parts[k + 5:]
        name = ":".join(parts[:k])
        if name == ":".join(parts[k + 5 :]):
            return name
    last = rest.rsplit(":", 6)
    return last[0] if len(last) == 7 else rest


def _push_pop_names(cell: str) -> Iterator[tuple[str, str]]:
    """(domain, name) of each push/pop token: `<domain>:<name>:<6 attribute fields>`."""
    for token in split_tokens(cell):
        domain, sep, rest = token.partition(":")
        if sep:
            yield domain, _name_of(rest)


def _start_end_names(cell: str) -> Iterator[tuple[str, str]]:
    """(domain, name) of each start/end token: `<id>:<domain>:<name>:<6 attribute fields>`."""
    for token in split_tokens(cell):
        _range_id, sep, rest = token.partition(":")
        if not sep:
            continue
        domain, sep, rest = rest.partition(":")
        if sep:
            yield domain, _name_of(rest)


def parse_push_pop(cell: str) -> list[NvtxRange]:
    return [NvtxRange(domain, name, "push_pop") for domain, name in _push_pop_names(cell)]


def parse_start_end(cell: str) -> list[NvtxRange]:
    return [NvtxRange(domain, name, "start_end") for domain, name in _start_end_names(cell)]


@functools.lru_cache(maxsize=4096)
def ranges(push_pop_cell: str, start_end_cell: str) -> tuple[str, ...]:
    """Range names enclosing a launch, outermost first: push/pop stacks, then start/end ranges (the
    names of enclosing(parse_push_pop(...), parse_start_end(...)), without the range objects)."""
    return tuple(name for _, name in itertools.chain(_push_pop_names(push_pop_cell),
                                                      _start_end_names(start_end_cell)))


def enclosing(push_pop: list[NvtxRange], start_end: list[NvtxRange]) -> tuple[str, ...]:
    """The one order every importer gives a launch's ranges: push/pop stacks (domains as ncu prints
    them, each bottom first), then start/end ranges."""
    return tuple(r.name for r in push_pop + start_end)


def path(names: tuple[str, ...] | list[str]) -> str:
    return "/".join(names)


# torch.autograd.profiler.emit_nvtx names each range "aten::addmm, seq = 12, op_id = 5, sizes = [[64, 128],
# [128, 256]], input_op_ids = [(3, 0)]". seq / op_id / input_op_ids are counters that shift whenever one op
# is added upstream, so they cannot identify a call across two runs; sizes can (a new shape is a new call).
_EMIT_NVTX_FIELD = re.compile(r",\s*(seq|op_id|sizes|input_op_ids)\s*=\s*")
_COUNTERS: frozenset[str] = frozenset({"seq", "op_id", "input_op_ids"})


@functools.lru_cache(maxsize=65536)
def stable_range_name(name: str, *, keep_sizes: bool = True) -> str:
    """One range name without emit_nvtx's counters (and without `sizes` unless keep_sizes).
    The fields are found by their ', key = ' markers, so a shape list holding ', ' stays whole."""
    marks = list(_EMIT_NVTX_FIELD.finditer(name))
    if not marks:
        return name
    kept = [name[: marks[0].start()]]
    for m, nxt in zip(marks, [*marks[1:], None], strict=True):
        if m.group(1) in _COUNTERS or (m.group(1) == "sizes" and not keep_sizes):
            continue
        kept.append(name[m.start() : nxt.start() if nxt is not None else len(name)])
    return "".join(kept)


def stable_nvtx_path(nvtx_path: str, *, keep_sizes: bool = True) -> str:
    """An NVTX path that means the same call in two runs: every range name without emit_nvtx's
    `seq`, `op_id` and `input_op_ids` counters; `sizes` stays unless keep_sizes=False (grouping by op)."""
    if not nvtx_path:
        return ""
    return "/".join(stable_range_name(part, keep_sizes=keep_sizes) for part in nvtx_path.split("/"))


def step_of_path(nvtx_path: str) -> int | None:
    """The N of the innermost step range (STEP_RANGE) of an NVTX path; None when it has none."""
    for part in reversed(nvtx_path.split("/") if nvtx_path else []):
        m = STEP_RANGE.match(part.strip())
        if m:
            return int(m.group("n"))
    return None


def steps(marked: object, nvtx_paths: object) -> Any:
    """The report's `step` column (pandas Int64): the importer's own step number where it has one (torch
    traces), else the step range of the NVTX path."""
    import pandas as pd

    paths = pd.Series(nvtx_paths, dtype=object).fillna("").astype(str)
    by_path = {p: step_of_path(p) for p in paths.unique()}
    from_path = pd.array(paths.map(by_path).tolist(), dtype="Int64")
    if marked is None:
        return from_path
    own = pd.array(pd.Series(marked).tolist(), dtype="Int64")
    return pd.array([o if o is not pd.NA else p for o, p in zip(own, from_path, strict=True)], dtype="Int64")
