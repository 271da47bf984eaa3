"""Tensor-core paths: which sm__ops_path_tensor_* metrics exist per GPU family, what each one counts (read
from its name), which to sum without double counting, and the MMA instruction shapes behind the tensor-pipe
estimate (ncu 2025.3.1's tensor roofline sections). Split from
nsroof.counters.metric_formulas, which re-exports these names for its formula table."""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterable
from dataclasses import dataclass

TENSOR_PREFIX = "sm__ops_path_tensor_"


# ---------------------------------------------------------------------------------------------
# Tensor cores: which sm__ops_path_tensor_* metrics exist per GPU family (ncu 2025.3.1 tensor
# section [S1]; roofline-metrics.md §3.2). `{a,b}` expands; a trailing "+sp" adds the
# _sparsity_off and _sparsity_on variants.

TENSOR_FAMILIES: dict[str, dict[str, tuple[str, ...]]] = {
    "TU10x": {"cc": ("7.5",),
              "aggregate": ("src_fp16_dst_fp16", "src_fp16_bf16_tf32_dst_fp32", "src_{int8,int4,int1}"),
              "per_class": ()},
    "GA100/GA10x/GA10y": {"cc": ("8.0", "8.6", "8.7"),
                          "aggregate": ("src_{fp16_dst_fp16,fp16_dst_fp32,bf16_dst_fp32,tf32_dst_fp32,"
                                        "int8,int4}+sp",
                                        "src_fp64", "src_int1"),
                          "per_class": ()},
    "AD10x": {"cc": ("8.9",),
              "aggregate": ("src_{fp16_dst_fp16,fp16_dst_fp32,bf16_dst_fp32,tf32_dst_fp32,int8,int4,fp8}+sp",
                            "src_fp64", "src_int1"),
              "per_class": ()},
    "GH100": {"cc": ("9.0",),
              "aggregate": ("src_{fp16,bf16_dst_fp32,tf32_dst_fp32,fp64,int8,int1}", "src_fp8+sp"),
              "per_class": ("op_hgmma_src_{fp16,bf16_dst_fp32,tf32_dst_fp32}+sp",
                            "op_hmma_src_{fp16_dst_fp16,fp16_dst_fp32,bf16_dst_fp32,tf32_dst_fp32}+sp",
                            "op_{igmma,imma}_src_int8+sp", "op_{bgmma,bmma}_src_int1")},
    "GB100/GB10b": {"cc": ("10.0", "11.0"),
                    "aggregate": ("src_{fp16_dst_fp16,fp16_dst_fp32,bf16_dst_fp32,tf32_dst_fp32,fp64,int8,"
                                  "fp4_dst_fp32,fp4_fp6_fp8_dst_fp16,fp4_fp6_fp8_dst_fp32}",),
                    "per_class": ("op_utchmma_src_{fp16_dst_fp16,fp16_dst_fp32,bf16_dst_fp32,"
                                  "tf32_dst_fp32}+sp",
                                  "op_utcqmma_src_fp4_fp6_fp8_dst_{fp16,fp32}+sp",
                                  "op_utcomma_src_fp4_dst_fp32+sp",
                                  "op_utcimma_src_int8+sp",
                                  "op_hmma_src_{fp16_dst_fp16,fp16_dst_fp32,bf16_dst_fp32,tf32_dst_fp32}+sp",
                                  "op_imma_src_int8+sp")},
    "GB11x": {"cc": ("10.3",),
              "aggregate": ("src_{fp16_dst_fp16,fp16_dst_fp32,bf16_dst_fp32,tf32_dst_fp32,fp64,int8,"
                            "fp4_dst_fp32,fp4_fp6_dst_fp16,fp4_fp6_dst_fp32}",),
              "per_class": ("op_utcqmma_src_fp8_dst_fp16+sp", "op_utcqmma_src_fp8_dst_fp32_sparsity_off",
                            "op_utcqmma_src_fp4_fp6_dst_{fp16,fp32}+sp", "op_utcomma_src_fp4_dst_fp32+sp",
                            "op_utchmma_src_{fp16_dst_fp16,fp16_dst_fp32,bf16_dst_fp32,tf32_dst_fp32}+sp",
                            "op_hmma_src_{fp16_dst_fp16,fp16_dst_fp32,bf16_dst_fp32,tf32_dst_fp32}+sp",
                            "op_imma_src_int8+sp")},
    "GB20x/GB20b": {"cc": ("12.0", "12.1"),
                    "aggregate": ("src_{fp16_dst_fp16,fp16_dst_fp32,bf16_dst_fp32,tf32_dst_fp32,fp64,int8}",
                                  "src_{fp8_dst_fp16,fp8_dst_fp32,fp4_dst_fp32,"
                                  "fp4_fp6_dst_fp16,fp4_fp6_dst_fp32}+sp"),
                    "per_class": ("op_hmma_src_{fp16_dst_fp16,fp16_dst_fp32,bf16_dst_fp32,tf32_dst_fp32}+sp",
                                  "op_imma_src_int8+sp")},
}

# FLOPs per sm__inst_executed_pipe_tensor instruction, one per MMA instruction shape the architecture
# issues (NVIDIA: "too many variants of the MMA instruction"), largest first. 7.x: HMMA.884 = 2·8·8·4 =
# 512 per warp instruction (NERSC's factor on V100 [S2]); 7.5: HMMA.1688 = 2·16·8·8 = 2048; 8.x:
# HMMA.16816 = 2·16·8·16 = 4096 (the factor of a public A100 script, roofline-metrics.md §3.2), HMMA.1688
# = 2048 (f16 m16n8k8, TF32 m16n8k8), HMMA.1684 = 1024 (TF32 m16n8k4). cuBLAS and CUTLASS kernels of the
# same GEMM can issue shapes 2× apart, so the report picks, per kernel, the largest shape that keeps the
# estimate within the tensor roof at the profiled clock (nsroof.roofs.classify). Hopper and later issue
# wgmma/tcgen05, whose work per instruction is not fixed: no estimate.
TENSOR_SHAPES_BY_CC: dict[str, tuple[tuple[str, float], ...]] = {
    "7.0": (("HMMA.884", 512.0),), "7.2": (("HMMA.884", 512.0),), "7.5": (("HMMA.1688", 2048.0),),
    **{cc: (("HMMA.16816", 4096.0), ("HMMA.1688", 2048.0), ("HMMA.1684", 1024.0))
       for cc in ("8.0", "8.6", "8.7", "8.9")},
}
# The default (largest) shape: the factor quantities.derive applies before a roof is known.
TENSOR_FLOP_PER_INST_BY_CC: dict[str, float] = {cc: shapes[0][1]
                                                for cc, shapes in TENSOR_SHAPES_BY_CC.items()}
# The dtype whose dense tensor roof bounds a pipe-count estimate: the HMMA (FP16) path every generation
# with an estimate has; on A100 FP16 = BF16, on GeForce the FP16-accumulate rate (the highest).
TENSOR_ESTIMATE_DTYPE = "fp16"
# Tensor-pipe busy cycles, summed over SMs: FLOPs ≤ these × the per-SM, per-cycle dense peak.
TENSOR_ACTIVE_CYCLES: tuple[str, ...] = ("sm__pipe_tensor_cycles_active.sum",
                                         "sm__pipe_tensor_op_hmma_cycles_active.sum",
                                         "sm__pipe_tensor_cycles_active_v2.sum")

# Source types that have no 2:4 sparse variant: an unsplit metric of these types is dense work.
_NEVER_SPARSE = frozenset({"fp64", "int1"})
# 2:4 structured sparsity arrived with Ampere (CC 8.0); before it every tensor op is dense.
FIRST_SPARSE_CC = 8.0
# ncu's DRAM roofs are absent on integrated parts (CC 8.7, 11.0, 12.1): no DRAM metrics there.
_NO_DRAM_CC = frozenset({"8.7", "11.0", "12.1"})


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
    for family, spec in TENSOR_FAMILIES.items():
        if norm in spec["cc"]:
            return family
    return None


def tensor_metric_names(cc: str | None) -> list[str]:
    """Base names (without .sum) of every sm__ops_path_tensor_* metric of the family of `cc`."""
    family = tensor_family(cc)
    if family is None:
        return []
    spec = TENSOR_FAMILIES[family]
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
