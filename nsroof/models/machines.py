"""Machine ceilings: peak FLOP/s per precision and bandwidth per memory level, each with a source.

A machine profile is data (JSON), never code branches. Packaged datasheet profiles live in
nsroof/data/machines/*.json; `nsroof measure` writes the same shape with source "measured".

JSON shape (one object; a packaged file may hold a list of them):
{
  "name": "H100 SXM",
  "aliases": ["h100", "h100-sxm", "NVIDIA H100 80GB HBM3"],
  "source": "spec",                               # spec | measured | file
  "peak_flop_per_s": {"fp64": ..., "fp32": ..., "tf32": ..., "bf16": ..., "fp16": ..., "fp8": ..., "int8": ...},
        # dense; the best rate a matmul of that dtype reaches (tensor cores where they serve it)
  "sparse_peak_flop_per_s": {...},                # 2:4 structured sparsity, kept apart, never used for dense work
  "simt_flop_per_s": {"fp64": ..., "fp32": ..., "fp16": ...},
        # CUDA-core (non-tensor) rates: the roofs for FLOPs ncu counts from SASS FADD/FMUL/FFMA...
  "bandwidth_bytes_per_s": {"dram": ..., "l2": ..., "l1": ...},   # (l3 for CPUs)
  "sources": {"peak_flop_per_s.bf16": "citation", "bandwidth_bytes_per_s.dram": "citation", ...},
  "environment": {...},                           # measured profiles: device, clocks, versions
  "points": [...]                                 # measured profiles: every measured point
}
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from nsroof.errors import MachineError


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
        d["aliases"] = list(self.aliases)
        d.pop("path")
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any], *, path: str = "") -> Machine:
        if not isinstance(d, dict) or "name" not in d:
            raise MachineError(f"{path or 'machine profile'}: expected a JSON object with at least 'name'")
        known = {f for f in cls.__dataclass_fields__ if f != "path"}
        kwargs = {k: v for k, v in d.items() if k in known}
        kwargs["aliases"] = tuple(kwargs.get("aliases", ()))
        for key in ("peak_flop_per_s", "sparse_peak_flop_per_s", "simt_flop_per_s", "bandwidth_bytes_per_s"):
            kwargs[key] = {str(k): float(v) for k, v in (kwargs.get(key) or {}).items() if v is not None}
        return cls(path=path, **kwargs)

    def save(self, path: str | os.PathLike[str]) -> None:
        from nsroof.report.atomic import atomic_write_text

        atomic_write_text(path, json.dumps(self.to_dict(), indent=2, sort_keys=False) + "\n")
