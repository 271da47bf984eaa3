"""Seeds and deterministic mutations for the importer fuzz harness (tests/fuzz/harness.py).

A case is (seed file, mutation, rng): the same case number under the same seed always gives the same
bytes. Seeds are the repo's own small exports (tests/data, plus an ncu text page and a torch trace
generated from the importers' tests) and, when present, every file of ../shared/fixtures/{csv,
converted,synthetic,traces,rep}. Mutations are what the issue-15 attacker tried: truncation, byte
flips, NUL bytes, invalid UTF-8, duplicated/deleted/shuffled lines, ragged rows, unbalanced quotes,
renamed headers, units swapped for another dimension, special values, 1 MB names, a million blank
lines, gzip of damaged content, flipped bytes in .ncu-rep, JSON with wrong types, missing keys or
deep nesting."""

from __future__ import annotations

import gzip
import json
import random
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from tests import _paths
from tests._paths import SHARED_FIXTURES

REPO_DATA = _paths.DATA


@dataclass(frozen=True)
class Seed:
    name: str  # file name, its suffix tells the importer nothing: content is sniffed
    data: bytes  # plain bytes (gzip seeds are stored decompressed, `gz` says to compress again)
    gz: bool = False

    @property
    def kind(self) -> str:
        if self.name.endswith(".ncu-rep"):
            return "rep"
        return "json" if self.name.removesuffix(".gz").endswith(".json") else "text"


@dataclass(frozen=True)
class Case:
    number: int
    seed: str
    mutation: str
    suffix: str  # file name suffix to write the case under
    data: bytes
    expect_error: bool = False  # a mutation a report must not survive (a unit of another dimension)


def own_seeds() -> list[Seed]:
    """The repo's own small inputs: ncu CSV (details, raw), ncu text output, a torch trace."""
    from tests.importers.ncu.test_ncu_text import TEXT_2024
    from tests.importers.trace.test_kineto import _new_style

    seeds = [Seed(p.name, p.read_bytes()) for p in sorted((REPO_DATA / "ncu").glob("*.csv"))]
    seeds.append(Seed("tiny_raw.csv", (REPO_DATA / "spine" / "tiny_raw.csv").read_bytes()))
    seeds.append(Seed("ncu_raw_nvtx.csv", (REPO_DATA / "collectors" / "ncu_raw_nvtx.csv").read_bytes()))
    seeds.append(Seed("text_2024.txt", TEXT_2024.encode()))
    seeds.append(Seed("trace.json", json.dumps(_new_style()).encode()))
    return seeds


def shared_seeds() -> list[Seed]:
    """Every export and trace under ../shared/fixtures (none when absent)."""
    out: list[Seed] = []
    if not SHARED_FIXTURES.is_dir():
        return out
    for folder in ("csv", "converted", "synthetic", "traces", "rep"):
        for p in sorted((SHARED_FIXTURES / folder).glob("*")):
            if not p.is_file() or p.stat().st_size > (8 << 20):
                continue
            data = p.read_bytes()
            if data[:2] == b"\x1f\x8b":
                try:
                    out.append(Seed(p.name, gzip.decompress(data), gz=True))
                except (OSError, EOFError):
                    continue
            else:
                out.append(Seed(p.name, data))
    return out


# ---------------------------------------------------------------------------------------------
# mutations: (rng, seed bytes) -> bytes; each keeps to what it names
# ---------------------------------------------------------------------------------------------

Mutation = Callable[[random.Random, bytes], bytes]


def _lines(data: bytes) -> list[bytes]:
    return data.split(b"\n")


def truncate(rng: random.Random, data: bytes) -> bytes:
    return data[: rng.randrange(max(1, len(data)))]


def flip_bytes(rng: random.Random, data: bytes) -> bytes:
    out = bytearray(data)
    for _ in range(rng.randint(1, 8)):
        i = rng.randrange(len(out))
        out[i] ^= 1 << rng.randrange(8)
    return bytes(out)


def nul_bytes(rng: random.Random, data: bytes) -> bytes:
    i = rng.randrange(len(data) + 1)
    return data[:i] + b"\0" * rng.randint(1, 16) + data[i:]


def invalid_utf8(rng: random.Random, data: bytes) -> bytes:
    i = rng.randrange(len(data) + 1)
    return data[:i] + rng.choice([b"\xff", b"\xc3", b"\xed\xa0\x80", b"\xfe\xff"]) + data[i:]


def duplicate_line(rng: random.Random, data: bytes) -> bytes:
    lines = _lines(data)
    i = rng.randrange(len(lines))
    return b"\n".join(lines[: i + 1] + [lines[i]] * rng.randint(1, 3) + lines[i + 1 :])


def delete_line(rng: random.Random, data: bytes) -> bytes:
    lines = _lines(data)
    del lines[rng.randrange(len(lines))]
    return b"\n".join(lines)


def shuffle_lines(rng: random.Random, data: bytes) -> bytes:
    lines = _lines(data)
    for _ in range(rng.randint(1, 4)):
        i, j = rng.randrange(len(lines)), rng.randrange(len(lines))
        lines[i], lines[j] = lines[j], lines[i]
    return b"\n".join(lines)


def ragged_row(rng: random.Random, data: bytes) -> bytes:
    lines = _lines(data)
    i = rng.randrange(len(lines))
    cells = lines[i].split(b",")
    if rng.random() < 0.5 and len(cells) > 1:
        cells = cells[: rng.randrange(1, len(cells))]
    else:
        cells += [b'"extra"'] * rng.randint(1, 5)
    lines[i] = b",".join(cells)
    return b"\n".join(lines)


def unbalanced_quote(rng: random.Random, data: bytes) -> bytes:
    quotes = [m.start() for m in re.finditer(rb'"', data[: 1 << 20])]
    i = rng.choice(quotes) if quotes and rng.random() < 0.7 else rng.randrange(len(data) + 1)
    return data[:i] + b'"' + data[i:]


def rename_header(rng: random.Random, data: bytes) -> bytes:
    names = [b'"ID"', b'"Kernel Name"', b'"Metric Name"', b'"Metric Value"', b'"Metric Unit"',
             b'"Section Name"', b'"gpu__time_duration.sum"', b'"dram__bytes.sum"', b'"traceEvents"',
             b'"name"', b'"dur"', b'"ts"', b"Section:", b"gpu__time_duration.sum"]
    present = [n for n in names if n in data]
    if not present:
        return flip_bytes(rng, data)
    old = rng.choice(present)
    new = rng.choice([b'"Renamed"', b'""', old.upper(), old + b" ", old.replace(b"_", b"-")])
    return data.replace(old, new, 1)


# unit -> a unit of another dimension: a value that would be converted and used with the wrong meaning
_WRONG_UNITS = {
    b"usecond": b"Kbyte", b"nsecond": b"Gbyte", b"msecond": b"byte", b"Mbyte": b"usecond",
    b"Kbyte": b"nsecond", b"Gbyte": b"msecond", b"byte": b"usecond", b"Ghz": b"Kbyte",
    b"cycle/nsecond": b"byte", b"inst": b"nsecond", b"cycle": b"Mbyte",
}


# roofline counters, and the Speed Of Light labels ncu maps to them (a whole cell, or a text line's label)
_KNOWN = re.compile(rb"gpu__time_duration|dram__bytes|lts__t_bytes|l1tex__t_bytes|sass_thread_inst_executed|"
                    rb"cycles_elapsed|\"(Duration|DRAM Frequency|SM Frequency|Elapsed Cycles)\"|"
                    rb"^\s+(Duration|DRAM Frequency|SM Frequency|Elapsed Cycles)\s\s")
_UNIT = rb"(usecond|nsecond|msecond|[KMG]?byte|Ghz|cycle/nsecond|inst|cycle)"
# Strict per number, lenient per metric (issue 19): a wrong unit refuses the file only on a counter a
# roofline number reads (nsroof.counters.dimensions.is_read); any other is dropped with a warning. So a
# swap counts (expects an error) only there. Labels: Duration = gpu__time_duration.sum and DRAM Frequency
# = dram__cycles_elapsed.avg.per_second are read; SM Frequency (gpc__) and Elapsed Cycles are not.
_READ_LABELS = re.compile(rb'"(Duration|DRAM Frequency)"|^\s+(Duration|DRAM Frequency)\s\s')
_METRIC_NAME = re.compile(rb"[a-z0-9]+__[a-z0-9_]+(?:\.[a-z0-9_]+)*")


def _read_by_roofline(name: bytes) -> bool:
    from nsroof.counters.dimensions import is_read

    return is_read(name.decode("ascii", "replace"))


def _names_a_read_counter(line: bytes) -> bool:
    """A details row or text line of a counter (or label) a roofline number reads."""
    if _READ_LABELS.search(line):
        return True
    return any(_read_by_roofline(m.group(0)) for m in _METRIC_NAME.finditer(line))


def swap_unit(rng: random.Random, data: bytes) -> bytes:
    """The unit of a roofline counter (or of a label ncu maps to one) replaced by another dimension's:
    a details row or text line naming it, or its cell in a raw page's units row."""
    lines = _lines(data)
    spots: list[tuple[int, int, int]] = []  # (line, start, end) of a unit
    for i, line in enumerate(lines):
        if _KNOWN.search(line) and _names_a_read_counter(line):
            spots += [(i, m.start(1), m.end(1)) for m in re.finditer(rb'"' + _UNIT + rb'"', line)]
            spots += [(i, m.start(1), m.end(1)) for m in re.finditer(rb"  " + _UNIT + rb"  ", line)]
        if line.startswith(b'"ID",') and i + 1 < len(lines) and lines[i + 1].startswith(b'"",'):
            names = line.split(b'","')
            units = lines[i + 1].split(b'","')
            at, pos = [], 0
            for k, cell in enumerate(units):  # cell offsets within the units row
                at.append(pos + (1 if k == 0 else 0))
                pos += len(cell) + 3
            for k, (name, unit) in enumerate(zip(names, units, strict=False)):
                if (_KNOWN.search(name) and _read_by_roofline(name.strip(b'"'))
                        and re.fullmatch(_UNIT, unit.strip(b'"\r'))):
                    u = unit.strip(b'"\r')
                    spots.append((i + 1, at[k], at[k] + len(u)))
    spots = [s for s in spots if lines[s[0]][s[1]:s[2]] in _WRONG_UNITS]
    if not spots:
        return data
    i, a, b = rng.choice(spots)
    lines[i] = lines[i][:a] + _WRONG_UNITS[lines[i][a:b]] + lines[i][b:]
    return b"\n".join(lines)


_SPECIAL = [b"-1", b"-inf", b"inf", b"nan", b"NaN", b"1e400", b"-1e400", b"-0", b"1e-400", b"-2.5",
            b"Infinity"]


def special_value(rng: random.Random, data: bytes) -> bytes:
    """A number cell (quoted CSV cell, aligned text column or JSON number) replaced by a special value."""
    spots = [(m.start(1), m.end(1)) for m in re.finditer(rb'"([0-9][0-9.,]*)"', data[: 4 << 20])]
    spots += [(m.start(1), m.end(1)) for m in re.finditer(rb'": ?([0-9][0-9.eE+-]*)[,}]', data[: 4 << 20])]
    spots += [(m.start(1), m.end(1)) for m in re.finditer(rb"  ([0-9][0-9.,]*)\n", data[: 4 << 20])]
    if not spots:
        return data
    value = rng.choice(_SPECIAL)
    out = data
    for a, b in sorted(rng.sample(spots, min(len(spots), rng.randint(1, 3))), reverse=True):
        out = out[:a] + value + out[b:]
    return out


def huge_name(rng: random.Random, data: bytes) -> bytes:
    """A kernel name (or any long quoted cell, or a JSON "name") of ~1 MB."""
    big = b"void k<" + b"A" * (1 << 20) + b">(float *)"
    m = (re.search(rb'"(void [^"\n]*|[a-z_]*kernel[^"\n]*|ampere_[^"\n]*)"', data)
         or re.search(rb'"name": ?"([^"]*)"', data))
    if m is None:
        i = rng.randrange(len(data) + 1)
        return data[:i] + big + data[i:]
    return data[: m.start(1)] + big + data[m.end(1) :]


def blank_lines(rng: random.Random, data: bytes, count: int = 1_000_000) -> bytes:
    lines = _lines(data)
    i = rng.randrange(1, max(2, len(lines)))
    blank = rng.choice([b"", b"\r", b" "])
    return b"\n".join(lines[:i] + [blank] * count + lines[i:])


def stray_newline(rng: random.Random, data: bytes) -> bytes:
    """A CR or LF inside a cell, or between a closing quote and the next comma."""
    spots = [m.start() for m in re.finditer(rb'",', data[: 4 << 20])]
    i = rng.choice(spots) + rng.choice([0, 1]) if spots else rng.randrange(len(data) + 1)
    return data[:i] + rng.choice([b"\r", b"\n", b"x\r", b"\rx"]) + data[i:]


# ------------------------------------------------------------------ JSON (torch traces)


def _walk(value: Any, path: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    out = [path]
    if isinstance(value, dict):
        for k, v in value.items():
            out += _walk(v, (*path, k))
    elif isinstance(value, list):
        for i, v in enumerate(value[:200]):
            out += _walk(v, (*path, i))
    return out


def _get(value: Any, path: tuple[Any, ...]) -> Any:
    for p in path:
        value = value[p]
    return value


_ODD_VALUES: list[Any] = [None, True, 0, -1, 1e308, "x", "", [], {}, [1, 2], {"a": 1}, "12", -1.5]


def json_wrong_type(rng: random.Random, data: bytes) -> bytes:
    try:
        doc = json.loads(data)
    except ValueError:
        return flip_bytes(rng, data)
    paths = [p for p in _walk(doc) if p]
    for _ in range(rng.randint(1, 3)):
        if not paths:
            break
        path = rng.choice(paths)
        parent = _get(doc, path[:-1])
        parent[path[-1]] = rng.choice(_ODD_VALUES)
        paths = [p for p in _walk(doc) if p]
    return json.dumps(doc).encode()


def json_missing_key(rng: random.Random, data: bytes) -> bytes:
    try:
        doc = json.loads(data)
    except ValueError:
        return flip_bytes(rng, data)
    keyed = [p for p in _walk(doc) if p and isinstance(p[-1], str)]
    for _ in range(rng.randint(1, 4)):
        if not keyed:
            break
        path = rng.choice(keyed)
        parent = _get(doc, path[:-1])
        parent.pop(path[-1], None)
        keyed = [p for p in _walk(doc) if p and isinstance(p[-1], str)]
    return json.dumps(doc).encode()


def json_deep(rng: random.Random, data: bytes) -> bytes:
    depth = rng.choice([1000, 5000, 100_000])
    inner = rng.choice([b"[", b'{"a":'])
    close = b"]" if inner == b"[" else b"}"
    nest = inner * depth + b"1" + close * depth
    try:
        doc = json.loads(data)
    except ValueError:
        return nest
    if isinstance(doc, dict) and isinstance(doc.get("traceEvents"), list) and doc["traceEvents"]:
        text = json.dumps(doc).encode()
        at = text.index(b'"args": ') + len(b'"args": ') if b'"args": ' in text else None
        if at is not None:
            return text[:at] + b'{"deep": ' + nest + b"," + text[at + 1 :]
    return nest


# ------------------------------------------------------------------ .ncu-rep


def rep_flip(rng: random.Random, data: bytes) -> bytes:
    """Flip bytes past the magic and the header (the container still passes the magic check)."""
    out = bytearray(data)
    for _ in range(rng.randint(1, 16)):
        i = rng.randrange(min(len(out), 64), len(out))
        out[i] ^= 1 << rng.randrange(8)
    return bytes(out)


TEXT_MUTATIONS: dict[str, Mutation] = {
    "truncate": truncate, "flip_bytes": flip_bytes, "nul_bytes": nul_bytes, "invalid_utf8": invalid_utf8,
    "duplicate_line": duplicate_line, "delete_line": delete_line, "shuffle_lines": shuffle_lines,
    "ragged_row": ragged_row, "unbalanced_quote": unbalanced_quote, "rename_header": rename_header,
    "swap_unit": swap_unit, "special_value": special_value, "huge_name": huge_name,
    "blank_lines": blank_lines, "stray_newline": stray_newline,
}
JSON_MUTATIONS: dict[str, Mutation] = {
    "truncate": truncate, "flip_bytes": flip_bytes, "nul_bytes": nul_bytes, "invalid_utf8": invalid_utf8,
    "json_wrong_type": json_wrong_type, "json_missing_key": json_missing_key, "json_deep": json_deep,
    "special_value": special_value, "huge_name": huge_name,
}
REP_MUTATIONS: dict[str, Mutation] = {"truncate": truncate, "rep_flip": rep_flip}


def make_case(number: int, seeds: list[Seed], seed: int, *, blank_count: int = 1_000_000) -> Case:
    rng = random.Random(f"{seed}:{number}")
    s = rng.choice(seeds)
    table = REP_MUTATIONS if s.kind == "rep" else JSON_MUTATIONS if s.kind == "json" else TEXT_MUTATIONS
    name = rng.choice(sorted(table))
    if name == "blank_lines":
        data = blank_lines(rng, s.data, blank_count)
    else:
        data = table[name](rng, s.data)
    expect_error = name == "swap_unit" and data != s.data
    # gzip: the seeds that came gzipped, and now and then damaged content compressed whole
    gz = s.gz or (s.kind != "rep" and rng.random() < 0.08)
    suffix = (".ncu-rep" if s.kind == "rep" else ".json" if s.kind == "json"
              else ".txt" if s.name.endswith(".txt") else ".csv")
    if gz:
        data = gzip.compress(data, compresslevel=1, mtime=0)
        suffix += ".gz"
        if rng.random() < 0.2:  # a damaged gzip stream
            data = flip_bytes(rng, data) if rng.random() < 0.5 else data[: max(10, len(data) // 2)]
            name += "+gzip-damaged"
        else:
            name += "+gzip"
    return Case(number, s.name, name, suffix, data, expect_error)
