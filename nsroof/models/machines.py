"""Machine ceilings: peak FLOP/s per precision and bandwidth per memory level, each with a source.

A machine profile is data (JSON), never code branches. Packaged datasheet profiles live in
nsroof/data/machines/*.json; `nsroof measure` writes the same shape with source "measured".

JSON shape (one object; a packaged file may hold a list of them):
{
  "name": "H100 SXM",
  "aliases": ["h100", "h100-sxm", "h100-80gb-hbm3"],      # names `--machine` accepts (case-insensitive)
  "device_patterns": ["H100 80GB HBM3", "H100[- ]SXM"],    # regexes matched against the device names ncu/torch print
  "architecture": "Hopper", "cc": "9.0",
  "source": "spec",                               # spec | measured | file
  "peak_flop_per_s": {"fp64": ..., "fp32": ..., "tf32": ..., "bf16": ..., "fp16": ..., "fp8": ..., "int8": ...},
        # dense; the best rate a matmul of that dtype reaches (tensor cores where they serve it)
  "sparse_peak_flop_per_s": {...},                # 2:4 structured sparsity, kept apart, never used for dense work
  "simt_flop_per_s": {"fp64": ..., "fp32": ..., "fp16": ...},
        # CUDA-core (non-tensor) rates: the roofs for FLOPs ncu counts from SASS FADD/FMUL/FFMA...
  "bandwidth_bytes_per_s": {"dram": ..., "l2": ..., "l1": ...},   # (l3 for CPUs)
  "sources": {"peak_flop_per_s.bf16": "citation", "bandwidth_bytes_per_s.dram": "citation", ...},
  "environment": {...},                           # measured profiles: device, clocks, versions
  "points": [...],                                # measured profiles: every measured point
  "notes": ["..."]                                # caveats a reader of the table should know
}

Validation: each rate table accepts only its known keys, compared case-insensitively ("FP32" reads as
fp32, "DRAM" as dram): peak_flop_per_s and sparse_peak_flop_per_s the dtypes fp64 fp32 tf32 bf16 fp16
fp8 int8 fp4, simt_flop_per_s fp64 fp32 fp16, bandwidth_bytes_per_s dram l2 l1 l3. Any other key is an
error naming it (a typo would otherwise leave that roof silently unknown), and a profile must hold at
least one compute peak (dense or SIMT) and one bandwidth.

Lookup is data-driven: `lookup_device(name)` tries every packaged profile's `device_patterns`
(case-insensitive regular expressions, searched in the device name); `load(spec)` accepts a
packaged name or alias, or a path to a JSON profile.
"""

from __future__ import annotations

import difflib
import functools
import json
import os
import re
from dataclasses import asdict, dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

from nsroof.errors import InputError, MachineError

RATE_TABLES: tuple[str, ...] = ("peak_flop_per_s", "sparse_peak_flop_per_s", "simt_flop_per_s", "bandwidth_bytes_per_s")
DENSE_DTYPES: tuple[str, ...] = ("fp64", "fp32", "tf32", "bf16", "fp16", "fp8", "int8", "fp4")
SIMT_DTYPES: tuple[str, ...] = ("fp64", "fp32", "fp16")  # the CUDA-core rates the report reads
LEVELS: tuple[str, ...] = ("dram", "l2", "l1", "l3")  # l3: measured CPU profiles
# The keys each rate table may hold: anything else (a typo, "hbm", a SIMT tf32) would be read by
# nobody and leave that roof silently unknown, so it is refused. Keys are compared case-insensitively.
RATE_KEYS: dict[str, tuple[str, ...]] = {
    "peak_flop_per_s": DENSE_DTYPES,
    "sparse_peak_flop_per_s": DENSE_DTYPES,
    "simt_flop_per_s": SIMT_DTYPES,
    "bandwidth_bytes_per_s": LEVELS,
}
PACKAGE_DATA = "nsroof.data.machines"


@dataclass(frozen=True)
class Machine:
    name: str
    source: str = "spec"
    aliases: tuple[str, ...] = ()
    peak_flop_per_s: dict[str, float] = field(default_factory=dict)
    sparse_peak_flop_per_s: dict[str, float] = field(default_factory=dict)
    simt_flop_per_s: dict[str, float] = field(default_factory=dict)
    bandwidth_bytes_per_s: dict[str, float] = field(default_factory=dict)
    sources: dict[str, str] = field(default_factory=dict)
    environment: dict[str, Any] = field(default_factory=dict)
    points: list[dict[str, Any]] = field(default_factory=list)
    device_patterns: tuple[str, ...] = ()
    architecture: str = ""
    cc: str = ""
    notes: tuple[str, ...] = ()
    path: str = ""  # file it was loaded from, when any

    @property
    def label(self) -> str:
        """How the report's ceiling_source names this machine: spec:<name>, measured:<file>, file:<path>."""
        if self.source == "spec":
            return f"spec:{self.name}"
        if self.source == "measured":
            return f"measured:{Path(self.path).name if self.path else self.name}"
        return f"file:{self.path or self.name}"

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        for key in ("aliases", "device_patterns", "notes"):
            d[key] = list(getattr(self, key))
        d.pop("path")
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any], *, path: str = "") -> Machine:
        if not isinstance(d, dict) or "name" not in d:
            raise MachineError(f"{path or 'machine profile'}: expected a JSON object with at least 'name'")
        known = {f for f in cls.__dataclass_fields__ if f != "path"}
        kwargs = {k: v for k, v in d.items() if k in known}
        for key in ("aliases", "device_patterns", "notes"):
            value = kwargs.get(key) or ()
            if isinstance(value, str):
                value = (value,)
            kwargs[key] = tuple(str(v) for v in value)
        for key in RATE_TABLES:
            table = kwargs.get(key) or {}
            if not isinstance(table, dict):
                raise MachineError(f"{path or d['name']}: '{key}' must be an object of name -> number")
            try:
                kwargs[key] = {str(k): float(v) for k, v in table.items() if v is not None}
            except (TypeError, ValueError):
                raise MachineError(f"{path or d['name']}: '{key}' holds a value that is not a number") from None
            bad = [k for k, v in kwargs[key].items() if not v > 0 or v != v or v == float("inf")]
            if bad:
                raise MachineError(f"{path or d['name']}: '{key}' must hold positive finite numbers, not {bad}")
            kwargs[key] = _known_keys(kwargs[key], key, path or d["name"])
        where = path or d["name"]
        if not kwargs.get("peak_flop_per_s") and not kwargs.get("simt_flop_per_s"):
            also = "" if kwargs.get("bandwidth_bytes_per_s") else " and no bandwidth"
            raise MachineError(f"{where}: profile holds no compute peak (peak_flop_per_s or simt_flop_per_s){also}")
        if not kwargs.get("bandwidth_bytes_per_s"):
            raise MachineError(f"{where}: profile holds no bandwidth (bandwidth_bytes_per_s)")
        return cls(path=path, **kwargs)

    def save(self, path: str | os.PathLike[str]) -> None:
        from nsroof.atomic import atomic_write_text

        atomic_write_text(path, json.dumps(self.to_dict(), indent=2, sort_keys=False) + "\n")

    # ------------------------------------------------------------------ queries

    def ridge_flop_per_byte(self, dtype: str, level: str = "dram", *, table: str = "peak_flop_per_s") -> float:
        """peak / bandwidth: the intensity above which a kernel of that dtype is compute-bound at that
        level; NaN when either number is unknown."""
        peak = getattr(self, table).get(dtype)
        bandwidth = self.bandwidth_bytes_per_s.get(level)
        if not peak or not bandwidth:
            return float("nan")
        return peak / bandwidth

    def matches(self, device_name: str) -> bool:
        return any(_compiled(p).search(device_name) for p in self.device_patterns)


def _known_keys(table: dict[str, float], name: str, where: str) -> dict[str, float]:
    """The table with its keys lower-cased; an unknown key, or one given twice, is an error."""
    known = RATE_KEYS[name]
    out: dict[str, float] = {}
    for raw, value in table.items():
        key = raw.strip().casefold()
        if key not in known:
            close = difflib.get_close_matches(key, known, n=1, cutoff=0.6)
            guess = f" (did you mean '{close[0]}'?)" if close else ""
            raise MachineError(f"{where}: unknown key '{raw}' in '{name}'{guess}; known: {', '.join(known)}")
        if key in out:
            raise MachineError(f"{where}: '{name}' gives '{key}' twice (keys are case-insensitive)")
        out[key] = value
    return out


@functools.cache
def _compiled(pattern: str) -> re.Pattern[str]:
    return re.compile(pattern, re.IGNORECASE)


def _normal(name: str) -> str:
    """Case, spaces, '-' and '_' do not distinguish names: 'H100 SXM' == 'h100-sxm' == 'h100_sxm'."""
    return re.sub(r"[\s_\-]+", "-", name.strip().casefold())


@functools.lru_cache(maxsize=1)
def _packaged() -> tuple[Machine, ...]:
    out: list[Machine] = []
    root = resources.files(PACKAGE_DATA)
    for entry in sorted(root.iterdir(), key=lambda e: e.name):
        if not entry.name.endswith(".json"):
            continue
        where = f"{PACKAGE_DATA}/{entry.name}"
        try:
            data = json.loads(entry.read_text(encoding="utf-8"))
        except json.JSONDecodeError as exc:
            raise InputError(where, f"invalid JSON ({exc.msg})", line=exc.lineno, hint="fix the packaged machine table") from None
        for item in data if isinstance(data, list) else [data]:
            out.append(Machine.from_dict(item, path=""))
    # oldest architecture first (a stable sort keeps each file's own order)
    return tuple(sorted(out, key=lambda m: float(m.cc or "inf")))


def all_machines() -> list[Machine]:
    """Every packaged datasheet profile, oldest compute capability first."""
    return list(_packaged())


def _by_name() -> dict[str, Machine]:
    table: dict[str, Machine] = {}
    for m in _packaged():
        for key in (m.name, *m.aliases):
            table.setdefault(_normal(key), m)
    return table


def load(spec: str | os.PathLike[str]) -> Machine:
    """A packaged machine by name or alias (case-insensitive), or a JSON profile file
    (written by `nsroof measure` or by hand: one object in the shape documented above)."""
    text = os.fspath(spec)
    path = Path(text)
    if path.is_file():
        return load_file(path)
    found = _by_name().get(_normal(text))
    if found is not None:
        return found
    if text.endswith(".json") or os.sep in text:
        raise InputError(text, "no such machine profile file", hint="check the path, or pass a name from `nsroof machines`")
    names = sorted({m.name for m in _packaged()} | {a for m in _packaged() for a in m.aliases})
    close = difflib.get_close_matches(text, names, n=4, cutoff=0.5) or difflib.get_close_matches(
        _normal(text), [_normal(n) for n in names], n=4, cutoff=0.5
    )
    hint = f"did you mean {', '.join(close)}? " if close else ""
    raise MachineError(
        f"unknown machine '{text}' — {hint}`nsroof machines` lists the packaged ones; "
        "or pass a JSON profile (`nsroof measure -o FILE.json`)"
    )


def load_file(path: str | os.PathLike[str]) -> Machine:
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(p, f"cannot read machine profile ({exc})", hint="pass a JSON file") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise InputError(p, f"invalid JSON ({exc.msg})", line=exc.lineno, hint="a machine profile is one JSON object") from None
    if isinstance(data, list) and len(data) == 1:
        data = data[0]
    if not isinstance(data, dict):
        raise InputError(p, "expected one JSON object with 'name' and rate tables", line=1,
                         hint="see `nsroof machines --json` for the shape")
    data = dict(data)
    data.setdefault("source", "file")
    try:
        return Machine.from_dict(data, path=os.fspath(p))
    except MachineError as exc:
        raise InputError(p, str(exc).removeprefix(f"{p}: "), hint="see `nsroof machines --json` for the shape") from None


def lookup_device(device_name: str) -> Machine | None:
    """The packaged profile whose device_patterns match the name ncu or torch printed
    ("NVIDIA A100-SXM4-40GB", "GeForce GTX 1650", "Tesla V100-SXM2-16GB", ...); None when none does."""
    name = " ".join(str(device_name or "").split())
    if not name:
        return None
    for m in _packaged():
        if m.matches(name):
            return m
    return None


def markdown_table(profiles: list[Machine] | None = None) -> str:
    """The packaged ceilings as a Markdown table (docs/readme/machines.md is this output), dense
    figures with the 2:4 sparse ones in parentheses, and a numbered source list per machine."""

    def tera(value: float | None, sparse: float | None = None) -> str:
        if not value:
            return "—"
        def fmt(v: float) -> str:
            return f"{v / 1e12:,.0f}" if v >= 1e15 else f"{v / 1e12:,.4g}"

        return f"{fmt(value)} ({fmt(sparse)})" if sparse else fmt(value)

    def rate(value: float | None) -> str:
        return "—" if not value else (f"{value / 1e12:,.4g} TB/s" if value >= 1e12 else f"{value / 1e9:,.4g} GB/s")

    rows = [
        "| machine | match (device name regex) | FP64 | FP32 | TF32 | BF16 | FP16 | FP8 | INT8 | FP4 | SIMT FP64 / FP32 / FP16 | DRAM | L2 | ridge BF16-or-FP16 / DRAM |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for m in profiles if profiles is not None else all_machines():
        dense, sparse, simt = m.peak_flop_per_s, m.sparse_peak_flop_per_s, m.simt_flop_per_s
        cells = [tera(dense.get(k), sparse.get(k)) for k in ("fp64", "fp32", "tf32", "bf16", "fp16", "fp8", "int8", "fp4")]
        simt_text = " / ".join(tera(simt.get(k)) for k in ("fp64", "fp32", "fp16"))
        dtype = "bf16" if "bf16" in dense else "fp16"
        ridge = m.ridge_flop_per_byte(dtype)
        ridge_text = f"{ridge:,.0f}" if ridge == ridge else "—"
        # a '|' inside a regex would end the Markdown cell
        patterns = "<br>".join("`" + p.replace("|", "\\|") + "`" for p in m.device_patterns) or "(by name only)"
        rows.append(
            f"| **{m.name}** ({', '.join(m.aliases[:2])}) | {patterns} | " + " | ".join(cells)
            + f" | {simt_text} | {rate(m.bandwidth_bytes_per_s.get('dram'))} | {rate(m.bandwidth_bytes_per_s.get('l2'))}"
            + f" | {ridge_text} |"
        )
    lines = [*rows, "", "Sources, per machine (each number's own citation is in `sources` of its JSON entry):", ""]
    for m in profiles if profiles is not None else all_machines():
        cites = list(dict.fromkeys(m.sources.values()))
        lines.append(f"- **{m.name}**: " + " | ".join(cites))
        for note in m.notes:
            lines.append(f"  - note: {note}")
    return "\n".join(lines) + "\n"
