"""The physics check of a measured CPU profile: numbers the hardware cannot produce are refused, not used.

Three checks, each a one-phrase verdict with its numbers (`check_cpu_profile`):

* **order** — a cache level reads at least as fast as the levels behind it: l1 ≥ l2 ≥ l3 ≥ dram, each level
  against the fastest one behind it, within ORDER_TOLERANCE (down to 75 % of it). Why 25 %: the levels
  are read by different kernels (the caches by the ladder's read-only reduction, DRAM by the best of four
  streaming kernels, triad counting three streams), and two levels the reduction itself limits read at the
  same rate (the summary's "±10 %" note), so small inversions are the method's, not the machine's; 25 % is
  the drop the ladder's own plateau finder (ladder.find_plateaus) calls a new level, so an inversion larger
  than that is a level the run got wrong (the 2026-11-30 busy run in docs/readme/measure.md: l1 5.0 GB/s
  under l2 87.7 GB/s; a user's l1 2.1 GB/s under dram 21 GB/s).
* **ceiling** — a GEMM peak is at most cores × clock × FLOP per cycle, the most the CPU's vector units
  can issue (isa_flop_per_cycle, from the /proc/cpuinfo flags). The bound is generous on purpose (two FMA
  pipes assumed, SMT siblings counted as cores, a 2× turbo allowance where cpufreq gives no maximum), so
  a peak above it is a timing or counting error, never a fast machine.
* **floor** — a peak on a native path (fp32 and fp64 always: BLAS; bf16/fp16 where the CPU has the
  instruction, which torch's matmul hands to oneDNN) is at least 1/FLOOR_DIVISOR of that bound. Why 1/64:
  the bound can exceed the real FMA peak up to 8× (one FMA pipe on some parts instead of the two assumed,
  the 2× turbo allowance, SMT siblings counted as cores); a vendor GEMM reaches at least half of the real
  peak at the sweep's 512³–2048³ squares, so an idle machine measures ≥ bound/16; a further 4× for a
  machine shared with others (load average at 3× its CPUs, as on the 2-core development VM). Below that it
  is not the CPU's GEMM rate but a stalled or descheduled measurement (the busy run's fp16 11.2 GFLOP/s,
  against 146 GFLOP/s at one thread minutes later).

A check without the facts it needs (no ISA table for the architecture, no clock) is skipped and says why;
skipped checks never fail a profile.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

ORDER: tuple[str, ...] = ("l1", "l2", "l3", "dram")  # inner to outer
ORDER_TOLERANCE = 0.25  # an inner level may read down to (1 - 0.25) × an outer one
FLOOR_DIVISOR = 64.0
# Max turbo / nominal clock, bounded where cpufreq gives no maximum (a VM): no server or desktop x86 part
# exceeds 2× (Xeon Platinum 8480+ 2.0 → 3.8 GHz, 1.9×; Core i9-13900K 3.0 → 5.8 GHz, 1.93×; EPYC 9654
# 2.4 → 3.7 GHz, 1.54×: the vendors' specification pages). Laptop U-parts exceed it but run cpufreq.
TURBO_ALLOWANCE = 2.0

# FLOP per cycle per core (FLOP = 2 per multiply-add, as GEMM FLOP = 2·M·N·K), x86:
# - AVX-512: two 512-bit FMA pipes (ports 0+1 fused and port 5 on Xeon Scalable: Intel 64 and IA-32
#   Optimization Reference Manual, Skylake Server) × 16 fp32 lanes × 2 = 64 fp32, 32 fp64.
# - AVX2 + FMA: two 256-bit FMA pipes (Haswell onward; AMD Zen 1-4 likewise) × 8 lanes × 2 = 32 fp32.
# - AVX without FMA (Sandy/Ivy Bridge): one 256-bit add + one 256-bit multiply per cycle = 16 fp32.
# - SSE2: one 128-bit add + one 128-bit multiply per cycle = 8 fp32.
# - AVX512_BF16: VDPBF16PS adds two bf16 products into each of 16 fp32 lanes (64 FLOP per instruction),
#   two per cycle on the FMA pipes = 128.
# - AVX512_FP16: VFMADD…PH on 32 fp16 lanes (64 FLOP per instruction), two per cycle = 128.
# - AMX-BF16 / AMX-FP16: one TDPBF16PS/TDPFP16PS tile product, 16×16×32 multiply-adds = 16,384 FLOP, every
#   16 cycles = 1024 FLOP per cycle per core ("2048 INT8 or 1024 BF16 operations per cycle", Intel's 4th
#   Gen Xeon Scalable / Architecture Day 2021; Wikipedia, Advanced Matrix Extensions).
# Without its own instruction a dtype is converted and multiplied at the fp32 rate (F16C, AVX-512 bf16
# emulation); fp8 has no CPU instruction: the fastest of the others bounds it.
X86_FP32: tuple[tuple[frozenset[str], float, str], ...] = (
    (frozenset({"avx512f"}), 64.0, "AVX-512: 2 FMA pipes × 16 fp32 lanes × 2"),
    (frozenset({"avx2", "fma"}), 32.0, "AVX2+FMA: 2 FMA pipes × 8 fp32 lanes × 2"),
    (frozenset({"fma"}), 32.0, "FMA: 2 FMA pipes × 8 fp32 lanes × 2"),
    (frozenset({"avx"}), 16.0, "AVX: 8-lane add + 8-lane multiply"),
    (frozenset({"sse2"}), 8.0, "SSE2: 4-lane add + 4-lane multiply"),
)
# aarch64: ASIMD (NEON) on up to four 128-bit FMA pipes (Neoverse V2, Apple Firestorm) × 4 fp32 × 2 = 32;
# SVE up to two 512-bit pipes (A64FX) × 16 × 2 = 64. BFMMLA does a 2×4·4×2 product per 128-bit
# instruction, 4× the multiply-adds of FMLA: bf16 ≤ 4× fp32; FP16 arithmetic doubles the lanes: 2×.
# SME's matrix units are not in this table: with "sme" nothing is bounded.
ARM_FP32: tuple[tuple[frozenset[str], float, str], ...] = (
    (frozenset({"sve"}), 64.0, "SVE: up to 2 × 512-bit FMA pipes × 16 fp32 lanes × 2"),
    (frozenset({"asimd"}), 32.0, "ASIMD: up to 4 × 128-bit FMA pipes × 4 fp32 lanes × 2"),
)


@dataclass(frozen=True)
class Check:
    name: str  # "order l1>=dram", "ceiling bf16", "floor fp32"
    status: str  # "pass" | "fail" | "skip"
    detail: str  # the numbers, or why it was skipped


@dataclass(frozen=True)
class Verdict:
    checks: tuple[Check, ...]

    @property
    def failed(self) -> list[Check]:
        return [c for c in self.checks if c.status == "fail"]

    @property
    def passed(self) -> bool:
        return not self.failed

    def line(self) -> str:
        """The failed checks, one phrase each ('' when all passed)."""
        return "; ".join(f"{c.name}: {c.detail}" for c in self.failed)

    def to_dict(self) -> dict[str, Any]:
        return {"passed": self.passed, "failed": self.line(),
                "checks": [{"name": c.name, "status": c.status, "detail": c.detail} for c in self.checks]}


def isa_flop_per_cycle(flags: Sequence[str], arch: str) -> dict[str, tuple[float, str]]:
    """dtype -> (FLOP per cycle per core, the ISA behind it); {} for an architecture without a table."""
    have = set(flags)
    x86 = arch.lower() in ("x86_64", "amd64", "i686", "i386", "x86")
    arm = arch.lower() in ("aarch64", "arm64")
    if arm and "sme" in have:
        return {}
    table = X86_FP32 if x86 else ARM_FP32 if arm else ()
    fp32 = next(((v, why) for need, v, why in table if need <= have), None)
    if fp32 is None:
        return {}
    out = {"fp32": fp32, "fp64": (fp32[0] / 2, f"{fp32[1]}, half the lanes")}
    if x86:
        out["bf16"] = ((1024.0, "AMX-BF16: 1024 per tile unit") if "amx_bf16" in have else
                       (128.0, "AVX512_BF16: VDPBF16PS × 2 pipes") if "avx512_bf16" in have else
                       (fp32[0], "no bf16 instruction: converted, at the fp32 rate"))
        out["fp16"] = ((1024.0, "AMX-FP16: 1024 per tile unit") if "amx_fp16" in have else
                       (128.0, "AVX512_FP16: 32 lanes × 2 pipes") if "avx512_fp16" in have else
                       (fp32[0], "no fp16 instruction: converted, at the fp32 rate"))
    else:
        out["bf16"] = ((4 * fp32[0], "BFMMLA: 4× the fp32 multiply-adds") if "bf16" in have else
                       (fp32[0], "no bf16 instruction: converted, at the fp32 rate"))
        out["fp16"] = ((2 * fp32[0], "FP16 arithmetic: 2× the fp32 lanes") if have & {"fphp", "asimdhp"} else
                       (fp32[0], "no fp16 instruction: converted, at the fp32 rate"))
    fastest = max(out.values())
    out["fp8"] = (fastest[0], f"no fp8 instruction: at most the fastest path ({fastest[1]})")
    return out


def native(dtype: str, flags: Sequence[str], arch: str) -> bool:
    """Whether torch's CPU matmul of `dtype` runs on the CPU's own instructions (a BLAS/oneDNN kernel) rather
    than a conversion path: only those get the floor."""
    have = set(flags)
    if dtype in ("fp32", "fp64"):
        return True
    if arch.lower() in ("aarch64", "arm64"):
        return dtype == "bf16" and "bf16" in have
    return (dtype == "bf16" and bool(have & {"amx_bf16", "avx512_bf16"})) or \
        (dtype == "fp16" and bool(have & {"amx_fp16", "avx512_fp16"}))


def clock_bound(env: Mapping[str, Any]) -> tuple[float, str] | None:
    """(the highest clock a core may run at, in Hz, and how it was found), or None when none is known."""
    top = env.get("clock_max_mhz")
    if top:
        return float(top) * 1e6, f"{float(top):,.0f} MHz (cpufreq maximum)"
    stated = [float(v) for v in (env.get("clock_mhz_at_start"), env.get("clock_nominal_mhz")) if v]
    if not stated:
        return None
    how = f"{max(stated):,.0f} MHz × {TURBO_ALLOWANCE:g} turbo allowance"
    return max(stated) * 1e6 * TURBO_ALLOWANCE, how


def peak_bounds(env: Mapping[str, Any]) -> tuple[dict[str, tuple[float, str]], str]:
    """(dtype -> (the most FLOP/s the CPU can issue with the threads used, the arithmetic behind it), '') or
    ({}, why there is no bound)."""
    per_cycle = isa_flop_per_cycle(env.get("isa_flags") or (), str(env.get("arch", "")))
    clock = clock_bound(env)
    threads = int(env.get("threads_used") or 0)
    cores = min(threads, int(env.get("logical_cpus") or threads)) if threads else 0
    if not per_cycle:
        return {}, f"no FLOP-per-cycle table for {env.get('arch') or 'this CPU'} with its flags"
    if clock is None or not cores:
        return {}, "the clock or the thread count is not recorded"
    return {d: (cores * clock[0] * v, f"{cores} core(s) × {clock[1]} × {v:g} FLOP/cycle ({why})")
            for d, (v, why) in per_cycle.items()}, ""


def check_order(bandwidths: Mapping[str, float]) -> list[Check]:
    """Each level against the fastest level behind it (so l1 ≥ l2 ≥ l3 ≥ dram, within ORDER_TOLERANCE):
    one check per level that has a level behind it, named after that fastest outer level."""
    present = [lv for lv in ORDER if bandwidths.get(lv, 0) > 0]
    checks = []
    for i, inner in enumerate(present[:-1]):
        outer = max(present[i + 1:], key=lambda lv: bandwidths[lv])
        a, b = bandwidths[inner], bandwidths[outer]
        ok = a >= (1 - ORDER_TOLERANCE) * b
        relation = "≥" if ok else "<"
        checks.append(Check(f"order {inner}>={outer}", "pass" if ok else "fail",
                            f"{inner} {_gb(a)} {relation} {1 - ORDER_TOLERANCE:.0%} of {outer} {_gb(b)}"
                            + ("" if ok else ": a cache reads slower than the memory behind it")))
    return checks


def check_peaks(peaks: Mapping[str, float], env: Mapping[str, Any]) -> list[Check]:
    """Each peak under the ISA bound and, on a native path, above bound / FLOOR_DIVISOR."""
    bounds, why_none = peak_bounds(env)
    flags, arch = env.get("isa_flags") or (), str(env.get("arch", ""))
    checks = []
    for dtype, peak in peaks.items():
        if dtype not in bounds:
            checks.append(Check(f"ceiling {dtype}", "skip", why_none or f"no bound for {dtype}"))
            continue
        bound, how = bounds[dtype]
        over = not peak <= bound
        checks.append(Check(f"ceiling {dtype}", "fail" if over else "pass",
                            f"{dtype} {_gf(peak)} {'>' if over else '≤'} {_gf(bound)} = {how}"
                            + (": more than the vector units can issue, a timing or counting error"
                               if over else "")))
        if not native(dtype, flags, arch):
            checks.append(Check(f"floor {dtype}", "skip", f"no native {dtype} instruction: no floor"))
            continue
        low = not peak >= bound / FLOOR_DIVISOR
        checks.append(Check(f"floor {dtype}", "fail" if low else "pass",
                            f"{dtype} {_gf(peak)} {'<' if low else '≥'} 1/{FLOOR_DIVISOR:g} of its bound "
                            f"{_gf(bound)}" + (": a stalled or shared-CPU measurement" if low else "")))
    return checks


def check_cpu_profile(peaks: Mapping[str, float], bandwidths: Mapping[str, float],
                      env: Mapping[str, Any]) -> Verdict:
    """The order, ceiling and floor checks of one CPU measurement."""
    finite = {k: v for k, v in bandwidths.items() if v is not None and math.isfinite(v)}
    return Verdict(tuple(check_order(finite) + check_peaks(peaks, env)))


def _gb(value: float) -> str:
    return f"{value / 1e9:,.1f} GB/s"


def _gf(value: float) -> str:
    return f"{value / 1e9:,.1f} GFLOP/s"
