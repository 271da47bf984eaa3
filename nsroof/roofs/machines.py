"""Machine ceilings: peak FLOP/s per precision and bandwidth per memory level, each with a source.

A machine profile is data (JSON), never code branches. Packaged datasheet profiles live in
nsroof/data/machines/*.json; `nsroof measure` writes the same shape with source "measured".

JSON shape (one object; a packaged file may hold a list of them):
{
  "name": "H100 SXM",
  "aliases": ["h100-sxm", "h100-sxm5", "h100-80gb-hbm3"],      # names `--machine` accepts (case-insensitive)
  "device_patterns": ["H100 80GB HBM3", "H100[- ]SXM"],
        # regexes matched against the device names ncu/torch print
  "architecture": "Hopper", "cc": "9.0",
  "source": "spec",                               # spec | measured | file
  "peak_flop_per_s": {"fp64": ..., "fp32": ..., "tf32": ..., "bf16": ..., "fp16": ..., "fp8": ...,
                      "int8": ...},
        # dense; the best rate a matmul of that dtype reaches (tensor cores where they serve it)
  "sparse_peak_flop_per_s": {...},
        # 2:4 structured sparsity, kept apart, never used for dense work
  "simt_flop_per_s": {"fp64": ..., "fp32": ..., "fp16": ...},
        # CUDA-core (non-tensor) rates: the roofs for FLOPs ncu counts from SASS FADD/FMUL/FFMA...
  "bandwidth_bytes_per_s": {"dram": ..., "l2": ..., "l1": ...},   # (l3 for CPUs)
  "sm_count": 132,                                # SMs: the per-SM figures below are multiplied by it
  "clocks_hz": {"boost": ..., "base": ..., "dram": ...},
        # boost: the SM clock the datasheet peaks assume; base: the clock ncu locks to by default
        # (--clock-control base); dram: the DRAM clock ncu counts dram__cycles in; tensor (optional):
        # the clock a datasheet's low-precision tensor figures assume when it is not boost (Hopper)
  "bytes_per_cycle": {"dram": ..., "l2": ..., "l1": ...},
        # what ncu's chart multiplies by a clock: dram = whole device per DRAM cycle, l2 = whole L2
        # per L2 cycle, l1 = per SM per SM cycle (× sm_count)
  "counters": {"l2": "lts2xbar", "l1": "lsu"},    # the counter the l2 / l1 figures are the roof of
  "counter_bytes_per_cycle": {"l2.lts__t": ...},  # the level's other counter (counter_bandwidth_bytes_per_s
        # at boost is derived from it): a roof is the one of the counter the bytes came from, or none
  "sources": {"peak_flop_per_s.bf16": "citation", "bandwidth_bytes_per_s.dram": "citation", ...},
  "environment": {...},                           # measured profiles: device, clocks, versions
  "points": [...],                                # measured profiles: every measured point
  "notes": ["..."],                               # caveats a reader of the table should know
  "memory_bytes": 85899345920, "llvm_target": "gfx942"  # memory (GB read as GiB), AMD's gfx target: what
}                                                 # tells GPUs of one name apart (roofs.gpu_identity)

Validation: each rate table accepts only its known keys, compared case-insensitively ("FP32" reads as
fp32, "DRAM" as dram): peak_flop_per_s and sparse_peak_flop_per_s the dtypes fp64 fp32 tf32 bf16 fp16
fp8 int8 fp4, simt_flop_per_s fp64 fp32 fp16, bandwidth_bytes_per_s dram l2 l1 l3. Any other key is an
error naming it (a typo would otherwise leave that roof silently unknown), and a profile must hold at
least one compute peak (dense or SIMT) and one bandwidth. clocks_hz accepts boost base dram;
bytes_per_cycle dram l2 l1.

Ceilings are per-cycle peaks × a clock, as ncu computes its own (`Machine.at_clocks`): FLOP peaks ×
SM clock / boost (the datasheet peak is per-SM-cycle work × SMs × boost), DRAM bytes/cycle × DRAM clock,
L2 bytes/cycle × L2 clock, L1 bytes/cycle/SM × SMs × SM clock. An L2 or L1 bandwidth a datasheet does
not print is derived at the boost clock from bytes_per_cycle when loading (its source says so).

Lookup is data-driven: `lookup_device(name)` tries every packaged profile's `device_patterns`
(case-insensitive regular expressions, searched in the device name), and a generic name ("NVIDIA H100")
only where one entry's family fits it (`device_candidates` names them otherwise). `resolve(spec)` is the
one meaning of `--machine` for every command: a packaged name or alias, a device name exactly as ncu or
nvidia-smi print it, or a path to a JSON profile.
"""

from __future__ import annotations

import difflib
import functools
import json
import math
import os
import re
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field, replace
from importlib import resources
from pathlib import Path
from typing import Any

from nsroof import markdown
from nsroof.errors import InputError, MachineError
from nsroof.roofs.machine_tables import (
    COUNTER_KEYS,
    LEVEL_COUNTERS,
    cache_at_clocks,
    counters_table,
    derive_cache_bandwidths,
    known,
    known_keys,
    positive_table,
)

# the table keys, re-exported: callers read them here (machines.LEVELS, machines.RATE_KEYS)
from nsroof.roofs.machine_tables import DENSE_DTYPES as DENSE_DTYPES
from nsroof.roofs.machine_tables import LEVELS as LEVELS
from nsroof.roofs.machine_tables import RATE_KEYS as RATE_KEYS
from nsroof.roofs.machine_tables import SIMT_DTYPES as SIMT_DTYPES
from nsroof.units import human_bandwidth, human_tera

RATE_TABLES: tuple[str, ...] = ("peak_flop_per_s", "sparse_peak_flop_per_s", "simt_flop_per_s",
                                "bandwidth_bytes_per_s")
FLOP_TABLES: tuple[str, ...] = RATE_TABLES[:3]  # scaled with the SM clock
CLOCK_KEYS: tuple[str, ...] = ("boost", "base", "dram", "tensor")
# Dense-table dtypes a datasheet may quote at clocks_hz.tensor (Hopper's low-precision figures assume
# 1.83 GHz, its FP32/FP64 ones 1.98 GHz); FP64 and FP32 stay at the boost clock.
TENSOR_CLOCK_DTYPES: frozenset[str] = frozenset({"tf32", "bf16", "fp16", "fp8", "int8", "fp4"})
CYCLE_LEVELS: tuple[str, ...] = ("dram", "l2", "l1")
CACHE_LEVELS: tuple[str, ...] = ("l2", "l3")  # cache_bytes: capacities that explain traffic above a roof
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
    sm_count: int = 0
    clocks_hz: dict[str, float] = field(default_factory=dict)
    bytes_per_cycle: dict[str, float] = field(default_factory=dict)
    cache_bytes: dict[str, float] = field(default_factory=dict)
    # the counter the plain l2 / l1 figures (bytes_per_cycle, bandwidth_bytes_per_s) are the roof of, and the
    # roofs of the level's other counter, keyed "<level>.<counter>" (per cycle as bytes_per_cycle: whole L2,
    # or per SM for l1), each with its source
    counters: dict[str, str] = field(default_factory=dict)
    counter_bytes_per_cycle: dict[str, float] = field(default_factory=dict)
    counter_bandwidth_bytes_per_s: dict[str, float] = field(default_factory=dict)
    path: str = ""  # file it was loaded from, when any
    clock_note: str = ""  # set by at_clocks(): the profiled clocks these ceilings were computed at
    memory_bytes: float = 0.0  # device memory capacity (0: not in the entry); per device as ROCm lists them
    llvm_target: str = ""  # AMD GPUs: the LLVM target ("gfx942"); NVIDIA parts carry `cc` instead

    @property
    def label(self) -> str:
        """How the report's ceiling_source names this machine: spec:<name>, measured:<file>, file:<path>."""
        at = f" @ {self.clock_note}" if self.clock_note else ""
        if self.source == "spec":
            return f"spec:{self.name}{at}"
        if self.source == "measured":
            return f"measured:{Path(self.path).name if self.path else self.name}{at}"
        return f"file:{self.path or self.name}{at}"

    @property
    def kind(self) -> str:
        """'cpu', 'gpu', or '' when the profile does not say (a hand-written file without either hint)."""
        device = str(self.environment.get("device", "")).casefold()
        if device == "cpu" or "l3" in self.bandwidth_bytes_per_s:
            return "cpu"
        if device in ("cuda", "gpu") or self.cc or self.sm_count or self.device_patterns:
            return "gpu"
        return ""

    @property
    def vendor(self) -> str:
        """'AMD' (a gfx target), 'NVIDIA' (a compute capability), or '' (a CPU or hand-written profile)."""
        return "AMD" if self.llvm_target else "NVIDIA" if self.cc else ""

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        for key in ("aliases", "device_patterns", "notes"):
            d[key] = list(getattr(self, key))
        d.pop("path")
        d.pop("clock_note")
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any], *, path: str = "") -> Machine:
        if not isinstance(d, dict) or "name" not in d:
            raise MachineError(f"{path or 'machine profile'}: expected a JSON object with at least 'name'")
        known = {f for f in cls.__dataclass_fields__ if f not in ("path", "clock_note")}
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
                raise MachineError(
                    f"{path or d['name']}: '{key}' holds a value that is not a number") from None
            bad = [k for k, v in kwargs[key].items() if not v > 0 or v != v or v == float("inf")]
            if bad:
                raise MachineError(f"{path or d['name']}: '{key}' must hold positive finite numbers, not "
                                   f"{bad}")
            kwargs[key] = known_keys(kwargs[key], key, path or d["name"])
        where = path or d["name"]
        for key, allowed in (("clocks_hz", CLOCK_KEYS), ("bytes_per_cycle", CYCLE_LEVELS),
                             ("cache_bytes", CACHE_LEVELS), ("counter_bytes_per_cycle", COUNTER_KEYS),
                             ("counter_bandwidth_bytes_per_s", COUNTER_KEYS)):
            kwargs[key] = positive_table(kwargs.get(key) or {}, key, allowed, where)
        kwargs["counters"] = counters_table(kwargs, where)
        try:
            kwargs["sm_count"] = int(kwargs.get("sm_count") or 0)
            kwargs["memory_bytes"] = float(kwargs.get("memory_bytes") or 0.0)
        except (TypeError, ValueError):
            raise MachineError(f"{where}: 'sm_count' and 'memory_bytes' must be numbers") from None
        if not 0 <= kwargs["memory_bytes"] < math.inf:
            raise MachineError(f"{where}: 'memory_bytes' must be a positive finite number")
        kwargs["llvm_target"] = str(kwargs.get("llvm_target") or "")
        derive_cache_bandwidths(kwargs)
        if not kwargs.get("peak_flop_per_s") and not kwargs.get("simt_flop_per_s"):
            also = "" if kwargs.get("bandwidth_bytes_per_s") else " and no bandwidth"
            raise MachineError(f"{where}: profile holds no compute peak (peak_flop_per_s or "
                               f"simt_flop_per_s){also}")
        if not kwargs.get("bandwidth_bytes_per_s"):
            raise MachineError(f"{where}: profile holds no bandwidth (bandwidth_bytes_per_s)")
        return cls(path=path, **kwargs)

    def save(self, path: str | os.PathLike[str]) -> None:
        from nsroof.atomic import atomic_write_text

        atomic_write_text(path, json.dumps(self.to_dict(), indent=2, sort_keys=False) + "\n")

    # ------------------------------------------------------------------ queries

    def ridge_flop_per_byte(self, dtype: str, level: str = "dram", *,
                            table: str = "peak_flop_per_s") -> float:
        """peak / bandwidth: the intensity above which a kernel of that dtype is compute-bound at that
        level; NaN when either number is unknown."""
        peak = getattr(self, table).get(dtype)
        bandwidth = self.bandwidth_bytes_per_s.get(level)
        if not peak or not bandwidth:
            return float("nan")
        return peak / bandwidth

    def matches(self, device_name: str) -> bool:
        return any(_compiled(p).search(device_name) for p in self.device_patterns)

    def at_clocks(self, *, sm_hz: float = math.nan, dram_hz: float = math.nan, l2_hz: float = math.nan,
                  l1_hz: float = math.nan) -> Machine:
        """These ceilings at the clocks a profile recorded, as ncu computes its own: per-cycle peak × clock.
        FLOP peaks scale by sm_hz / boost; DRAM is bytes_per_cycle.dram × dram_hz; L2 bytes_per_cycle.l2 ×
        the L2 clock (the SM clock when only that was recorded); L1 bytes_per_cycle.l1 × SMs × the L1 clock
        (else the SM clock). A clock not recorded, or a figure without its per-cycle form, leaves that
        ceiling at its datasheet (boost) value. Measured profiles are returned unchanged: they were
        measured at their own clocks."""
        if self.source == "measured":
            return self
        boost = self.clocks_hz.get("boost")
        sm_ok, dram_ok = known(sm_hz), known(dram_hz)
        tables: dict[str, dict[str, float]] = {}
        used: list[str] = []
        if sm_ok and boost:
            tables = {t: {k: v * sm_hz / self._reference_clock(t, k) for k, v in getattr(self, t).items()}
                      for t in FLOP_TABLES}
            used.append(f"{sm_hz / 1e6:.0f} MHz SM")
        bandwidth = dict(self.bandwidth_bytes_per_s)
        per_cycle = self.bytes_per_cycle
        if dram_ok and per_cycle.get("dram"):
            bandwidth["dram"] = per_cycle["dram"] * dram_hz
            used.append(f"{dram_hz / 1e6:.0f} MHz DRAM")
        clocks = {"l2": l2_hz if known(l2_hz) else sm_hz, "l1": l1_hz if known(l1_hz) else sm_hz}
        l2_scale = sm_hz / boost if sm_ok and boost else math.nan
        bandwidth = cache_at_clocks(bandwidth, per_cycle, self.sm_count, clocks, l2_scale)
        counter_bw = cache_at_clocks(self.counter_bandwidth_bytes_per_s, self.counter_bytes_per_cycle,
                                      self.sm_count, clocks, l2_scale)
        levels_per_cycle = {k.split(".")[0] for k in (*per_cycle, *self.counter_bytes_per_cycle)}
        if known(l2_hz) and "l2" in levels_per_cycle:
            used.append(f"{l2_hz / 1e6:.0f} MHz L2")
        if not sm_ok and known(l1_hz) and "l1" in levels_per_cycle and self.sm_count:
            used.append(f"{l1_hz / 1e6:.0f} MHz L1")
        if not used and bandwidth == self.bandwidth_bytes_per_s:
            return self
        return replace(self, peak_flop_per_s=tables.get("peak_flop_per_s", self.peak_flop_per_s),
                       sparse_peak_flop_per_s=tables.get("sparse_peak_flop_per_s",
                                                         self.sparse_peak_flop_per_s),
                       simt_flop_per_s=tables.get("simt_flop_per_s", self.simt_flop_per_s),
                       bandwidth_bytes_per_s=bandwidth, counter_bandwidth_bytes_per_s=counter_bw,
                       clock_note=", ".join(used))

    def level_bandwidth(self, level: str, counter: str = "") -> tuple[float, str, str]:
        """The bandwidth roof of `level` for bytes of `counter` (the quantities' bytes_counter_<level>; ''
        for bytes of no counter), the table key it is, and — when there is none — why. A datasheet figure
        is the roof of one counter (`counters`, or the counter_* tables): never another counter's bytes'.
        A measured or hand-written profile that names no counter is a what-if for any counter."""
        plain = self.bandwidth_bytes_per_s.get(level)
        named = self.counters.get(level, "")
        if (not counter or counter == named or level not in LEVEL_COUNTERS
                or (not named and self.source != "spec")):
            return (float(plain), f"bandwidth_bytes_per_s.{level}", "") if plain else (math.nan, "", "")
        key = f"{level}.{counter}"
        value = self.counter_bandwidth_bytes_per_s.get(key)
        if value:
            return float(value), f"counter_bandwidth_bytes_per_s.{key}", ""
        has = f" (its {level.upper()} figure is the {named} counter's)" if named and plain else ""
        return math.nan, "", f"{self.label} has no {level.upper()} roof for the {counter} counter{has}"

    def flop_per_cycle_per_sm(self, table: str, dtype: str) -> float:
        """The per-SM, per-cycle work behind a datasheet peak: peak / (SMs × boost clock); NaN when the
        entry lacks any of the three. ncu's `*.peak_sustained` / SM count is the same figure."""
        peak = getattr(self, table).get(dtype)
        if not peak or not self.clocks_hz.get("boost") or not self.sm_count:
            return math.nan
        return float(peak) / (self.sm_count * self._reference_clock(table, dtype))

    def _reference_clock(self, table: str, dtype: str) -> float:
        """The SM clock a datasheet figure assumes: clocks_hz.tensor for the low-precision tensor rates
        where the entry gives one, else the boost clock."""
        if table != "simt_flop_per_s" and dtype in TENSOR_CLOCK_DTYPES and self.clocks_hz.get("tensor"):
            return self.clocks_hz["tensor"]
        return self.clocks_hz["boost"]


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
            raise InputError(where, f"invalid JSON ({exc.msg})", line=exc.lineno,
                             hint="fix the packaged machine table") from None
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


def resolve(spec: str | os.PathLike[str] | Machine | None) -> Machine | None:
    """What `--machine` means, for every command: None stays None; a Machine is itself; otherwise a
    JSON profile file (written by `nsroof measure` or by hand: one object in the shape documented
    above), a packaged name or alias (case-insensitive), or a device name exactly as ncu, torch or
    nvidia-smi print it ('NVIDIA A10G', 'Tesla V100-SXM2-16GB'). A family or generic device name
    that fits several entries ('a100', 'NVIDIA H100') is refused with the candidates named
    (family_names())."""
    if spec is None or isinstance(spec, Machine):
        return spec
    text = os.fspath(spec)
    path = Path(text)
    if path.is_file():
        return load_file(path)
    found = _by_name().get(_normal(text))
    if found is not None:
        return found
    if text.endswith(".json") or os.sep in text:
        raise InputError(text, "no such machine profile file",
                         hint="check the path, or pass a name from `nsroof machines`")
    candidates = device_candidates(text)
    if len(candidates) == 1:
        return candidates[0]
    if len(candidates) > 1:
        raise MachineError(f"machine '{text}' is a family name that fits several entries "
                           f"({', '.join(m.name for m in candidates)}); the board decides the peaks, so pick "
                           f"one: --machine '{candidates[0].name}' (or its alias from `nsroof machines`)")
    names = sorted({m.name for m in _packaged()} | {a for m in _packaged() for a in m.aliases}
                   | set(family_names()))
    close = difflib.get_close_matches(text, names, n=4, cutoff=0.5) or difflib.get_close_matches(
        _normal(text), [_normal(n) for n in names], n=4, cutoff=0.5
    )
    hint = f"did you mean {', '.join(close)}? " if close else ""
    raise MachineError(
        f"unknown machine '{text}' — {hint}`nsroof machines` lists the packaged ones; "
        "or pass a JSON profile (`nsroof measure -o FILE.json`)"
    )


def load(spec: str | os.PathLike[str]) -> Machine:
    """resolve() for a spec that is never None (kept for callers that predate resolve())."""
    found = resolve(spec)
    assert found is not None
    return found


def load_file(path: str | os.PathLike[str]) -> Machine:
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(p, f"cannot read machine profile ({exc})", hint="pass a JSON file") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise InputError(p, f"invalid JSON ({exc.msg})", line=exc.lineno,
                         hint="a machine profile is one JSON object") from None
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
        raise InputError(p, str(exc).removeprefix(f"{p}: "),
                         hint="see `nsroof machines --json` for the shape") from None


def lookup_device(device_name: str) -> Machine | None:
    """The packaged profile for the name ncu or torch printed ("NVIDIA A100-SXM4-40GB", "GeForce GTX
    1650", "Tesla V100-SXM2-16GB", ...); None when none fits, or when a generic name fits several
    (device_candidates names them)."""
    candidates = device_candidates(device_name)
    return candidates[0] if len(candidates) == 1 else None


# Vendor and product-line words a device name carries that no entry name does.
_VENDOR_WORDS = re.compile(r"\b(nvidia|geforce|tesla|quadro)\b", re.IGNORECASE)


# The device name nsroof gives a GPU it identified from facts other than its name (nsroof.roofs.gpu_identity):
# what it is (an entry's name, or an architecture when no single entry fits) and the evidence.
_INFERRED = re.compile(r"^(?P<what>.+?) \[inferred from (?P<how>.+)\]$")


def inferred_device(what: str, how: str) -> str:
    """'MI300X [inferred from …]': the report's device for a GPU identified from its properties or kernels;
    it resolves to the entry named `what` (lookup_device), or to none when `what` is an architecture."""
    return f"{what} [inferred from {how}]"


def split_inferred(device: str) -> tuple[str, str]:
    """(what, evidence) of an inferred_device() name; ('', '') for a name the export printed."""
    return (m["what"], m["how"]) if (m := _INFERRED.match(device)) else ("", "")


@functools.lru_cache(maxsize=256)
def _candidates(name: str) -> tuple[Machine, ...]:
    if not name:
        return ()
    what, _ = split_inferred(name)
    if what:
        named = _by_name().get(_normal(what))
        return (named,) if named is not None else ()
    # every entry whose pattern matches: one name ROCm prints for two parts ("AMD Instinct MI250X / MI250")
    # fits both, and the SM count decides (gpu_identity)
    matched = tuple(m for m in _packaged() if m.matches(name))
    if matched:
        return matched
    # A generic name ("NVIDIA H100", "Tesla V100"): the entries whose name starts with what is left
    # after the vendor words. One entry → it; several → ambiguous; the board variant decides the
    # peaks, so nsroof does not pick one.
    core = " ".join(_VENDOR_WORDS.sub(" ", name).split()).casefold()
    if not core:
        return ()
    return tuple(m for m in _packaged() if m.name.casefold() == core
                 or m.name.casefold().startswith(core + " "))


def family_names() -> dict[str, list[str]]:
    """The short names `--machine` refuses as ambiguous, each with the entries it fits: an entry
    name's first word ("a100", "h100", "v100") that, read as a device name, fits several boards."""
    words = {m.name.split()[0].casefold() for m in _packaged() if m.name.split()}
    fits = {w: [m.name for m in device_candidates(w)] for w in sorted(words) if any(c.isdigit() for c in w)}
    return {w: names for w, names in fits.items() if len(names) > 1}


def device_candidates(device_name: str) -> list[Machine]:
    """Every packaged entry the device name could mean: one for a name a device_pattern matches, several
    for a generic name that fits more than one board ("NVIDIA H100": SXM, PCIe, NVL), none otherwise."""
    return list(_candidates(" ".join(str(device_name or "").split())))


UNKNOWN_DEVICE_FIX = "pass --machine NAME (see `nsroof machines`) or a profile from `nsroof measure`"


def unknown_device(device_name: str) -> str:
    """The one wording for a device the table does not resolve (the report's `missing`, the analyze hint,
    the collectors): no name, a generic name that fits several entries, or a name no entry matches.
    Each contains "machine table"."""
    name = " ".join(str(device_name or "").split())
    if not name:
        return "the export names no GPU, so no machine table entry applies"
    what, how = split_inferred(name)
    if what:
        return (f"the export names no GPU the machine table knows, and what its facts imply ({what}, from "
                f"{how}) is not one machine table entry: the part decides the peaks")
    candidates = device_candidates(name)
    if len(candidates) > 1:
        return f"device {name!r} fits several machine table entries ({', '.join(m.name for m in candidates)})"
    return f"device {name!r} is not in the machine table"


def for_devices(explicit: Machine | None) -> Callable[[str], Machine | None]:
    """The machine of each device name in an export: `explicit` (--machine) for all of them, otherwise
    the datasheet entry the name resolves to (None when it does not, or is ambiguous)."""
    if explicit is not None:
        return lambda _device: explicit
    return lambda device: lookup_device(device) if device else None


def check_against_export(machine: Machine, devices: Iterable[str], *, gpu_export: bool) -> list[str]:
    """Warnings for a --machine that does not fit the export; an error for a CPU profile given to a
    GPU export (its roofs would make every kernel run at 1000s of % of them)."""
    names = sorted({d for d in devices if d})
    if gpu_export and machine.kind == "cpu":
        raise MachineError(f"machine '{machine.name}' is a CPU profile, but the export holds GPU kernels"
                           f"{' on ' + ', '.join(names) if names else ''}; pass a GPU: a name from "
                           "`nsroof machines`, or the device name the export prints")
    warnings: list[str] = []
    if not gpu_export and machine.kind == "gpu":
        warnings.append(f"--machine {machine.name} is a GPU, but the export's rows ran on the CPU")
    for device in names:
        fits = device_candidates(device)
        if fits and machine.source == "spec" and machine not in fits:
            warnings.append(f"--machine {machine.name} is not the export's device {device!r} "
                            f"({', '.join(m.name for m in fits)}): its roofs are a what-if")
    return warnings


def _level_cell(m: Machine, level: str, rate: Callable[[float | None], str]) -> str:
    """A level's roofs in the table, each with the counter it is the roof of."""
    named = m.counters.get(level)
    plain = m.bandwidth_bytes_per_s.get(level)
    cells = [f"{rate(plain)} `{named}`" if named else rate(plain)] if plain else []
    cells += [f"{rate(v)} `{k.split('.', 1)[1]}`" for k, v in m.counter_bandwidth_bytes_per_s.items()
              if k.startswith(f"{level}.")]
    return "<br>".join(cells) or "—"


def markdown_table(profiles: list[Machine] | None = None) -> str:
    """The packaged ceilings as a Markdown table (docs/readme/machines.md is this output), dense
    figures with the 2:4 sparse ones in parentheses, and a numbered source list per machine."""

    def tera(value: float | None, sparse: float | None = None) -> str:
        return f"{human_tera(value)} ({human_tera(sparse)})" if value and sparse else human_tera(value)

    def mhz(key: str, m: Machine) -> str:
        value = m.clocks_hz.get(key)
        return f"{value / 1e6:,.0f}" if value else "—"

    rows = []
    for m in profiles if profiles is not None else all_machines():
        dense, sparse, simt = m.peak_flop_per_s, m.sparse_peak_flop_per_s, m.simt_flop_per_s
        dtype = "bf16" if "bf16" in dense else "fp16"
        ridge = m.ridge_flop_per_byte(dtype)
        bandwidth = m.bandwidth_bytes_per_s
        rows.append([
            f"**{m.name}** ({', '.join(m.aliases[:2])})",
            "<br>".join(f"`{p}`" for p in m.device_patterns) or "(by name only)",
            *(tera(dense.get(k), sparse.get(k))
              for k in ("fp64", "fp32", "tf32", "bf16", "fp16", "fp8", "int8", "fp4")),
            " / ".join(tera(simt.get(k)) for k in ("fp64", "fp32", "fp16")),
            human_bandwidth(bandwidth.get("dram")),
            *(_level_cell(m, level, human_bandwidth) for level in ("l2", "l1")),
            f"{m.sm_count or '—'}, {mhz('boost', m)} / {mhz('base', m)}",
            f"{ridge:,.0f}" if ridge == ridge else "—",
        ])
    header = ["machine", "match (device name regex)", "FP64", "FP32", "TF32", "BF16", "FP16", "FP8", "INT8",
              "FP4", "SIMT FP64 / FP32 / FP16", "DRAM", "L2", "L1", "SMs, boost / base MHz",
              "ridge BF16-or-FP16 / DRAM"]
    lines = [*markdown.table(header, rows), "",
             "Sources, per machine (each number's own citation is in `sources` of its JSON entry):", ""]
    for m in profiles if profiles is not None else all_machines():
        cites = list(dict.fromkeys(m.sources.values()))
        lines.append(f"- **{m.name}**: " + " | ".join(cites))
        for note in m.notes:
            lines.append(f"  - note: {note}")
    return "\n".join(lines) + "\n"


@functools.cache
def _interconnects() -> dict[str, Any]:
    text = resources.files("nsroof").joinpath("data", "interconnect.json").read_text(encoding="utf-8")
    return dict(json.loads(text))


def interconnect(machine: str) -> dict[str, Any] | None:
    """The GPU-to-GPU interconnect of a machine name (as in data/machines: "B200", "H100 SXM"): {"link",
    "bandwidth_bytes_per_s" (per GPU per direction: the roof of a collective's bus bytes), "source" (the
    datasheet)}, or None when nsroof's table (nsroof/data/interconnect.json) has no entry."""
    table = _interconnects()["gpus"]
    entry = table.get(machine) or next((v for k, v in table.items() if k.lower() == machine.lower()), None)
    return dict(entry) if entry else None
