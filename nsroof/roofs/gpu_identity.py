"""Which GPU a trace ran on, when its device name alone does not say: from the device properties it recorded
(kineto's ``deviceProperties``: compute capability — on ROCm the GFXIP version of the gfx target —, SM or CU
count, memory), else from its kernel names (a ``gfx942`` target in a ROCm kernel, ``sm90_xmma`` cuBLAS
kernels). The answer is a machine table entry only when the facts leave one (or several with the same roofs);
otherwise the architecture the facts imply, the roofs NaN and the missing fact named (`--machine NAME`).

What was inferred is never silent: the report's device reads ``MI300X [inferred from …]``
(machines.inferred_device, which machines.lookup_device resolves), and the pipeline adds a line saying so.

    identify(DeviceFacts(name="", cc="9.4", sm_count=304, memory_bytes=192 * 2**30, platform="rocm"))
        -> Identity(machine=MI300X, device="MI300X [inferred from …]", how="…")
    machines.lookup_device("NVIDIA GeForce RTX 4060 Ti") -> the entry of a name alone (exports that print one)
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import pandas as pd

from nsroof.roofs import machines
from nsroof.roofs.machines import Machine

GIB = float(2**30)
# A device can never report more memory than its board holds; it reports a little less (ECC, reserved), and
# a board of half the memory is another part: the recorded size must lie in [MEMORY_FLOOR × entry, entry].
MEMORY_FLOOR = 0.85
# Entries the facts cannot tell apart still give one answer when their roofs agree to the datasheets'
# rounding (an MI210 and one MI250 GCD: 181.0 vs 362.1 / 2 TFLOP/s)
SAME_ROOF = 0.01
GPU_KINDS = ("kernel", "memcpy", "memset")
_AMD_NAME = re.compile(r"\b(AMD|Radeon|Instinct)\b", re.IGNORECASE)


@dataclass(frozen=True)
class DeviceFacts:
    """What an export records of one GPU. `cc`: computeMajor.computeMinor — NVIDIA's compute capability, or
    on ROCm the GFXIP major.minor of the gfx target (gfx942 -> 9.4, gfx90a -> 9.0, gfx1100 -> 11.0)."""

    name: str = ""
    cc: str = ""
    sm_count: int = 0  # SMs; CUs on AMD (kineto's numSms)
    memory_bytes: float = 0.0  # totalGlobalMem
    warp_size: int = 0
    platform: str = ""  # 'rocm' or 'cuda' where the trace says (its roctracer / cupti versions)

    @property
    def amd(self) -> bool:
        return self.platform == "rocm" or self.warp_size == 64 or bool(_AMD_NAME.search(self.name))

    def text(self) -> str:
        """The recorded facts in words, as the report cites them."""
        parts = [f"device name {self.name!r}"] if self.name else []
        if self.cc:
            parts.append(f"GFXIP {self.cc}" if self.amd else f"CC {self.cc}")
        if self.sm_count:
            parts.append(f"{self.sm_count} {'CUs' if self.amd else 'SMs'}")
        if self.memory_bytes > 0:
            parts.append(f"{self.memory_bytes / GIB:.1f} GiB")
        return ", ".join(parts)


@dataclass(frozen=True)
class Identity:
    machine: Machine | None
    device: str  # the report's device: the printed name, or machines.inferred_device(...)
    how: str = ""  # the evidence ('' when the printed name alone resolved it)
    why_not: str = ""  # no machine: what is missing


def gfxip(target: str) -> str:
    """'gfx942' -> '9.4', 'gfx90a' -> '9.0', 'gfx1100' -> '11.0': the LLVM target's GFXIP major.minor (its
    last character is the stepping), which HIP reports as the device's major/minor."""
    m = re.fullmatch(r"gfx(\d+)([0-9a-f])([0-9a-f])", target.strip().lower())
    return f"{int(m[1])}.{int(m[2], 16)}" if m else ""


def fits(m: Machine, facts: DeviceFacts) -> bool:
    """Whether the recorded vendor, architecture, SM/CU count and memory agree with the entry (a fact either
    side lacks agrees)."""
    if m.vendor and facts.platform and m.vendor != {"rocm": "AMD", "cuda": "NVIDIA"}.get(facts.platform):
        return False
    arch = gfxip(m.llvm_target) if m.llvm_target else m.cc
    if re.fullmatch(r"\d+\.\d+", facts.cc) and arch and arch != facts.cc:
        return False
    if facts.sm_count and m.sm_count and facts.sm_count != m.sm_count:
        return False
    if facts.memory_bytes > 0 and m.memory_bytes > 0:
        return MEMORY_FLOOR * m.memory_bytes <= facts.memory_bytes <= m.memory_bytes
    return True


def agrees(m: Machine, facts: DeviceFacts) -> bool:
    """Whether a device printed with the entry's name is that entry: its SM/CU count and memory decide (a MIG
    slice or a CPX partition is not the whole GPU); a compute capability at odds with a name is no reason to
    drop the roofs the name gives."""
    return fits(m, replace(facts, cc="", platform=""))


def same_roofs(ms: Sequence[Machine]) -> bool:
    """Every entry holds the same figures (to SAME_ROOF) in every rate table: the choice changes no roof."""
    first = ms[0]
    for m in ms[1:]:
        for table in machines.RATE_TABLES:
            a, b = getattr(first, table), getattr(m, table)
            if set(a) != set(b) or any(not math.isclose(a[k], b[k], rel_tol=SAME_ROOF) for k in a):
                return False
    return True


def _by_arch(facts: DeviceFacts) -> list[Machine]:
    """The entries of the recorded architecture: the gfx targets of that GFXIP version on ROCm, the compute
    capability on CUDA."""
    if not facts.cc:
        return []
    if facts.amd:
        return [m for m in machines.all_machines() if m.llvm_target and gfxip(m.llvm_target) == facts.cc]
    return [m for m in machines.all_machines() if m.cc == facts.cc]


def _one(pool: Sequence[Machine], facts: DeviceFacts) -> tuple[Machine | None, list[Machine], str]:
    """(the entry, or None; the entries the facts leave; a note when several with one set of roofs remain)."""
    left = [m for m in pool if fits(m, facts)]
    if len(left) == 1:
        return left[0], left, ""
    if len(left) > 1 and same_roofs(left):
        return left[0], left, f"{' or '.join(m.name for m in left)}: the same roofs"
    return None, left, ""


def identify(facts: DeviceFacts, kernel_names: Iterable[str] = ()) -> Identity:
    """The machine of a device from its printed name, else its recorded properties, else its kernels' names
    (the module docstring). Never a guess: several entries with different roofs give no machine."""
    name = " ".join(facts.name.split())
    named = machines.device_candidates(name) if name else []
    if len(named) == 1 and agrees(named[0], facts):
        return Identity(named[0], name)
    pool = named or _by_arch(facts)
    found, left, note = _one(pool, facts)
    evidence = facts.text()
    how = f"the device's properties: {evidence}"
    if found is not None:
        how += f"; {note}" if note else ""
        return Identity(found, machines.inferred_device(found.name, how), how)
    if not (named or (facts.cc and facts.sm_count)):
        return from_kernel_names(kernel_names, facts)
    why = (f"{evidence} fits {'none' if not left else 'several'} of the machine table entries "
           f"{_names(left or pool)}" if pool else f"no machine table entry has {evidence}")
    if len(named) == 1:
        # the name's one entry, contradicted by the recorded SMs or memory (a MIG slice, a CPX partition,
        # another board): a device the name would resolve must not carry that entry's roofs
        return Identity(None, machines.inferred_device(name, f"{how}, which the {named[0].name} entry does "
                                                             "not have"), how, why)
    if named:  # a printed name that fits several entries stays the device (it resolves to none)
        return Identity(None, name, how, why)
    label = f"{'AMD' if facts.amd else 'NVIDIA'} GPU of {_arch_word(facts)}"
    return Identity(None, machines.inferred_device(label, how), how, why)


def _arch_word(facts: DeviceFacts) -> str:
    return f"GFXIP {facts.cc}" if facts.amd else f"CC {facts.cc}"


# What a kernel name says of the GPU it was compiled for, most specific first: (pattern, label, the entries
# it leaves). sm_90a/sm_100a/sm_120 kernels (wgmma, tcgen05) run on that architecture only; sm80_/ampere_
# names also run on every later part, so they bound the architecture and name no family. A gfx target in a
# ROCm kernel name is exact. aiter builds for CDNA 3 and 4 (gfx942, gfx950).
_GFX = re.compile(r"(?<![0-9a-z])gfx(9[0-9][0-9a-f]|1[0-2][0-9][0-9a-f])(?![0-9a-z])", re.IGNORECASE)
_NVIDIA_FAMILIES: tuple[tuple[re.Pattern[str], str, tuple[str, ...]], ...] = (
    (re.compile(r"(?<![0-9a-z])sm_?100a?_|cutlass3x_sm100", re.IGNORECASE), "NVIDIA Blackwell (sm_100)",
     ("10.0", "10.3")),
    (re.compile(r"(?<![0-9a-z])sm_?120a?_|cutlass3x_sm120", re.IGNORECASE), "NVIDIA Blackwell (sm_120)",
     ("12.0",)),
    (re.compile(r"(?<![0-9a-z])sm_?90a?_|cutlass3x_sm90", re.IGNORECASE), "NVIDIA Hopper (sm_90)", ("9.0",)),
)
_NVIDIA_BOUNDS: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"(?<![0-9a-z])(sm_?89_|ada_)", re.IGNORECASE), "8.9"),
    (re.compile(r"(?<![0-9a-z])(sm_?86_)", re.IGNORECASE), "8.6"),
    (re.compile(r"(?<![0-9a-z])(sm_?80_|ampere_|cutlass_80_)", re.IGNORECASE), "8.0"),
    (re.compile(r"(?<![0-9a-z])(sm_?75_|turing_|cutlass_75_)", re.IGNORECASE), "7.5"),
    (re.compile(r"(?<![0-9a-z])(sm_?70_|volta_|cutlass_70_)", re.IGNORECASE), "7.0"),
)
_AITER = re.compile(r"\baiter\b|aiter::|5aiter", re.IGNORECASE)
_ROCM_LIBRARY = re.compile(r"^Cijk_|\bck_tile\b|\b\d*ck_tile|\bck::", re.IGNORECASE)


def _example(names: Sequence[str], pattern: re.Pattern[str]) -> str:
    """The first name the pattern finds, from the match on (48 characters at most)."""
    hit = next(m for n in names if (m := pattern.search(n)))
    text = hit.string[hit.start():]
    return text if len(text) <= 48 else text[:45] + "…"


def from_kernel_names(kernel_names: Iterable[str], facts: DeviceFacts | None = None) -> Identity:
    """The identity kernel names alone give (module docstring); an architecture, rarely one entry."""
    facts = facts or DeviceFacts()
    names = list(dict.fromkeys(str(n) for n in kernel_names if n))
    targets = sorted({m.group(0).lower() for n in names for m in [_GFX.search(n)] if m})
    if len(targets) == 1:
        pool = [m for m in machines.all_machines() if m.llvm_target == targets[0]]
        return _from_pool(pool, f"AMD {targets[0]}", f"kernel names: {_example(names, _GFX)}", facts)
    for pattern, label, ccs in _NVIDIA_FAMILIES:
        if any(pattern.search(n) for n in names):
            pool = [m for m in machines.all_machines() if m.cc in ccs]
            return _from_pool(pool, label, f"kernel names: {_example(names, pattern)}", facts)
    if any(_AITER.search(n) for n in names):
        pool = [m for m in machines.all_machines() if m.llvm_target in ("gfx942", "gfx950")]
        how = f"kernel names: {_example(names, _AITER)}"
        return _from_pool(pool, "AMD Instinct (CDNA 3 or 4)", how, facts)
    rocm_library = any(_ROCM_LIBRARY.search(n) for n in names)
    if rocm_library or facts.amd:
        how = f"kernel names: {_example(names, _ROCM_LIBRARY)}" if rocm_library else "its ROCm runtime"
        return _from_pool([m for m in machines.all_machines() if m.vendor == "AMD"], "AMD GPU", how, facts)
    for pattern, bound in _NVIDIA_BOUNDS:
        if any(pattern.search(n) for n in names):
            pool = [m for m in machines.all_machines() if m.cc and float(m.cc) >= float(bound)]
            how = f"kernel names: {_example(names, pattern)}, which every later GPU runs too"
            return _from_pool(pool, f"NVIDIA GPU of CC >= {bound}", how, facts)
    return Identity(None, facts.name, "", "neither the device's properties nor the kernel names say which")


def _from_pool(pool: list[Machine], label: str, how: str, facts: DeviceFacts) -> Identity:
    found, left, note = _one(pool, facts)
    if found is not None:
        how = how + (f"; {note}" if note else "")
        return Identity(found, machines.inferred_device(found.name, how), how)
    why = (f"{label} fits several machine table entries ({_names(left)}): the part decides the peaks"
           if left else f"no machine table entry is a {label}")
    return Identity(None, machines.inferred_device(label, how), how, why)


def _names(ms: Sequence[Machine], limit: int = 6) -> str:
    shown = ", ".join(m.name for m in ms[:limit])
    return shown + (f", … ({len(ms)} in all)" if len(ms) > limit else "")


# ----------------------------------------------------------------------------------------- a trace's devices


def trace_facts(extra: dict[str, Any]) -> list[DeviceFacts]:
    """The DeviceFacts of each GPU model an importer recorded in its facts (`gpus`, `gpu_platform`)."""
    platform = str(extra.get("gpu_platform") or "")
    out = []
    for g in extra.get("gpus") or []:
        if isinstance(g, dict):
            out.append(DeviceFacts(name=str(g.get("name") or ""), cc=str(g.get("cc") or ""),
                                   sm_count=int(g.get("sm_count") or 0),
                                   memory_bytes=float(g.get("memory_bytes") or 0.0),
                                   warp_size=int(g.get("warp_size") or 0), platform=platform))
    return out


def label_devices(kernels: pd.DataFrame, extra: dict[str, Any]) -> tuple[pd.DataFrame, list[str]]:
    """The kernel table with each GPU row's device identified (`identify`) where its printed name does not
    resolve to one machine its recorded facts agree with; and one line per device saying what was inferred
    and from what, or why no machine applies. Rows of other kinds (a CPU run's ops) are left alone."""
    if not len(kernels) or "device" not in kernels or "kind" not in kernels:
        return kernels, []
    gpu = kernels["kind"].astype(str).isin(GPU_KINDS).to_numpy()
    if not gpu.any():
        return kernels, []
    recorded = trace_facts(extra)
    platform = str(extra.get("gpu_platform") or "")
    devices = kernels["device"].astype(str).to_numpy(dtype=object)
    notes: list[str] = []
    for stated in pd.unique(devices[gpu]).tolist():
        rows = gpu & (devices == stated)
        facts = _facts_of(str(stated), recorded, platform)
        machine = machines.lookup_device(stated) if stated else None
        if machine is not None and agrees(machine, facts):
            continue
        names = (kernels["kernel_name"].astype(str).to_numpy(dtype=object)[rows] if "kernel_name" in kernels
                 else np.zeros(0, dtype=object))
        ident = identify(facts, pd.unique(names).tolist())
        if ident.machine is None and not ident.how:
            continue  # nothing known beyond the name: the ceilings hint says what is missing
        # a printed name is replaced by an inference only when that finds the machine, or when the name would
        # resolve to an entry its recorded facts contradict
        if ident.device != stated and (ident.machine is not None or not stated or machine is not None):
            devices = np.where(rows, ident.device, devices)
        notes.append(_note(str(stated), ident))
    out = kernels.copy()
    out["device"] = pd.Series(devices, index=kernels.index, dtype=object)
    return out, notes


def _facts_of(stated: str, recorded: list[DeviceFacts], platform: str) -> DeviceFacts:
    """The recorded facts of the device printed as `stated`: one model → its facts; none → the name alone."""
    mine = {f for f in recorded if " ".join(f.name.split()) == " ".join(stated.split())}
    if len(mine) == 1:
        return mine.pop()
    return DeviceFacts(name=stated, platform=platform)


def _note(stated: str, ident: Identity) -> str:
    printed = f"the export names its GPU {stated!r}" if stated else "the export names no GPU"
    if ident.machine is not None:
        return (f"GPU identity: {printed}; {ident.machine.name} inferred from {ident.how}: its datasheet "
                "roofs apply (--machine NAME overrides)")
    return f"GPU identity: {printed}; {ident.why_not}: no roofs; pass --machine NAME (see `nsroof machines`)"


def is_amd(device: str) -> bool:
    """Whether a report's device is an AMD GPU (its entry's vendor, or what its name or inference says)."""
    fitting = machines.device_candidates(device)
    if fitting:
        return all(m.vendor == "AMD" for m in fitting)
    what, _ = machines.split_inferred(device)
    return bool(_AMD_NAME.search(what or device))
