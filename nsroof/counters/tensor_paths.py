"""Tensor-core paths: which sm__ops_path_tensor_* metrics exist per GPU family, what each one counts (read
from its name), which to sum without double counting, and the MMA instruction shapes behind the tensor-pipe
estimate (ncu 2025.3.1's tensor roofline sections). Split from nsroof.counters.metric_formulas, whose formula
table and document use these. The per-GPU facts are data (nsroof/data/tensor_cores.json, a source each);
this module keeps the logic."""

from __future__ import annotations

import functools
import itertools
import json
import re
from collections.abc import Iterable
from dataclasses import dataclass
from importlib import resources
from typing import Any

TENSOR_PREFIX = "sm__ops_path_tensor_"


# ---------------------------------------------------------------------------------------------
# The per-GPU facts (which sm__ops_path_tensor_* metrics each family exports, the MMA instruction shapes,
# which GPUs have FP64 tensor cores, where 2:4 sparsity starts, which parts have no DRAM roof) are data,
# each with its source: nsroof/data/tensor_cores.json, read once.

# The dtype whose dense tensor roof bounds a pipe-count estimate: the HMMA (FP16) path every generation
# with an estimate has; on A100 FP16 = BF16, on GeForce the FP16-accumulate rate (the highest).
TENSOR_ESTIMATE_DTYPE = "fp16"
# Tensor-pipe busy cycles, summed over SMs: FLOPs ≤ these × the per-SM, per-cycle dense peak.
TENSOR_ACTIVE_CYCLES: tuple[str, ...] = ("sm__pipe_tensor_cycles_active.sum",
                                         "sm__pipe_tensor_op_hmma_cycles_active.sum",
                                         "sm__pipe_tensor_cycles_active_v2.sum")

# Source types that have no 2:4 sparse variant: an unsplit metric of these types is dense work.
_NEVER_SPARSE = frozenset({"fp64", "int1"})


@functools.cache
def _facts() -> dict[str, Any]:
    text = resources.files("nsroof").joinpath("data", "tensor_cores.json").read_text(encoding="utf-8")
    return dict(json.loads(text))


@functools.cache
def tensor_families() -> dict[str, dict[str, tuple[str, ...]]]:
    """Family name → its compute capabilities ("cc") and the sm__ops_path_tensor_* name patterns it exports,
    family-wide per source type ("aggregate") and per instruction class ("per_class"). `{a,b}` expands; a
    trailing "+sp" adds the _sparsity_off and _sparsity_on variants."""
    return {family["name"]: {k: tuple(family[k]) for k in ("cc", "aggregate", "per_class")}
            for family in _facts()["families"]}


@functools.cache
def tensor_shapes_by_cc() -> dict[str, tuple[tuple[str, float], ...]]:
    """FLOPs per sm__inst_executed_pipe_tensor instruction, one per MMA instruction shape the architecture
    issues (NVIDIA: "too many variants of the MMA instruction"), largest first. cuBLAS and CUTLASS kernels of
    the same GEMM can issue shapes 2× apart, so the report picks, per kernel, the largest shape that keeps the
    estimate within the tensor roof at the profiled clock (nsroof.roofs.classify). Hopper and later issue
    wgmma/tcgen05, whose work per instruction is not fixed: no estimate (no entry)."""
    return {cc: tuple((str(name), float(flop)) for name, flop in entry["shapes"])
            for entry in _facts()["mma_shapes"] for cc in entry["cc"]}


def tensor_flop_per_inst_by_cc() -> dict[str, float]:
    """The default (largest) shape's FLOPs per instruction: the factor quantities.derive applies before a roof
    is known."""
    return {cc: shapes[0][1] for cc, shapes in tensor_shapes_by_cc().items()}


@functools.cache
def fp64_tensor_ccs() -> frozenset[str]:
    """The compute capabilities with FP64 tensor cores (DMMA), which cuBLAS's DGEMM runs on."""
    return frozenset(_facts()["fp64_tensor_cc"]["cc"])


@functools.cache
def first_sparse_cc() -> float:
    """The first compute capability with 2:4 structured sparsity; before it every tensor op is dense."""
    return float(_facts()["first_sparse_cc"]["cc"])


@functools.cache
def no_dram_ccs() -> frozenset[str]:
    """The compute capabilities (integrated parts) where ncu has no DRAM metrics and so no DRAM roof."""
    return frozenset(_facts()["no_dram_cc"]["cc"])


def _expand(pattern: str) -> list[str]:
    sparse = pattern.endswith("+sp")
    body = pattern[:-3] if sparse else pattern
    pieces = re.split(r"(\{[^}]*\})", body)
    choices = [p[1:-1].split(",") if p.startswith("{") else [p] for p in pieces]
    names = ["".join(c) for c in itertools.product(*choices)]
    if sparse:
        names = [f"{n}_sparsity_{s}" for n in names for s in ("off", "on")]
    return names


def tensor_family(cc: str | None) -> str | None:
    """The tensor-section family of a compute capability ('8.0' → 'GA100/GA10x/GA10y'), None if none."""
    norm = normalize_cc(cc)
    for family, spec in tensor_families().items():
        if norm in spec["cc"]:
            return family
    return None


def tensor_metric_names(cc: str | None) -> list[str]:
    """Base names (without .sum) of every sm__ops_path_tensor_* metric of the family of `cc`."""
    family = tensor_family(cc)
    if family is None:
        return []
    spec = tensor_families()[family]
    return [TENSOR_PREFIX + n for pat in (*spec["aggregate"], *spec["per_class"]) for n in _expand(pat)]


@dataclass(frozen=True)
class TensorPath:
    """What one sm__ops_path_tensor_<X> metric counts, read from its name."""

    base: str  # full metric base name, e.g. sm__ops_path_tensor_op_hgmma_src_fp16_sparsity_off
    source_type: str  # e.g. fp16, bf16, fp4_fp6_fp8
    per_class: bool  # op_<instruction>_… (True) or the family-wide aggregate (False)
    sparsity: str  # "dense", "sparse", or "unsplit" (an aggregate over dense and sparse work)


_TENSOR_NAME = re.compile(r"^sm__ops_path_tensor_(?:(op_[a-z0-9]+)_)?src_(.+?)(?:_dst_[a-z0-9]+)?"
                          r"(_sparsity_(?:on|off))?$")


def tensor_path(base: str) -> TensorPath | None:
    m = _TENSOR_NAME.match(base)
    if not m:
        return None
    op, src, sp = m.groups()
    if sp == "_sparsity_on":
        sparsity = "sparse"
    elif sp == "_sparsity_off" or src in _NEVER_SPARSE:
        sparsity = "dense"
    else:
        sparsity = "unsplit"
    return TensorPath(base=base, source_type=src, per_class=op is not None, sparsity=sparsity)


def select_tensor_metrics(columns: Iterable[str], suffix: str = ".sum") -> list[TensorPath]:
    """The tensor metrics to sum, without double counting [S1, §3.2].

    A family exports the same work twice: per instruction class (op_hgmma_…, op_hmma_…) and as an
    aggregate per source type. Per source type, take the per-class metrics when the export has
    any (they are split dense/sparse), else the aggregate — never both.
    """
    paths = []
    for c in columns:
        if c.startswith(TENSOR_PREFIX) and c.endswith(suffix):
            p = tensor_path(c[: -len(suffix)])
            if p is not None:
                paths.append(p)
    with_class = {p.source_type for p in paths if p.per_class}
    return [p for p in paths if p.per_class or p.source_type not in with_class]


def normalize_cc(cc: str | float | None) -> str:
    """'8.0', '80', 'sm_80', 8 → '8.0'; '' when unknown."""
    if cc is None:
        return ""
    s = str(cc).strip().lower().removeprefix("sm_").removeprefix("sm").rstrip("af")
    if not s or s in ("nan", "<na>", "none"):
        return ""
    if re.fullmatch(r"\d+\.\d+", s):
        major, minor = s.split(".")
        return f"{int(major)}.{int(minor)}"
    if re.fullmatch(r"\d+", s):
        if len(s) == 1:
            return f"{s}.0"
        return f"{int(s[:-1])}.{s[-1]}"
    return ""
