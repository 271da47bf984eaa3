"""What one `nsroof measure` run sweeps: dtypes, GEMM shapes, buffer sizes, repetitions and time budgets.

The plan is plain data derived from the device and its caches, so the sweep code never branches on
"quick" itself and tests can build small plans directly.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field

KIB = 1024
MIB = 1024 * KIB
GIB = 1024 * MIB

# Bytes per element of each GEMM operand dtype (tf32 multiplies fp32 storage; fp8 is e4m3).
DTYPE_BYTES: dict[str, int] = {"fp64": 8, "fp32": 4, "tf32": 4, "fp16": 2, "bf16": 2, "fp8": 1}
ALL_DTYPES: tuple[str, ...] = ("fp64", "fp32", "tf32", "fp16", "bf16", "fp8")

# Llama-3.1-8B projection weights as (K, N, label): hidden 4096, 32 query heads and 8 key/value heads
# of width 128 (GQA, so k/v project to 8·128 = 1024), MLP width 14336 (the model's config.json).
LLAMA31_8B_PROJECTIONS: tuple[tuple[int, int, str], ...] = (
    (4096, 4096, "q_proj/o_proj 4096->4096"),
    (4096, 1024, "k_proj/v_proj 4096->1024"),
    (4096, 14336, "gate_proj/up_proj 4096->14336"),
    (14336, 4096, "down_proj 14336->4096"),
)

FULL_M_SWEEP: tuple[int, ...] = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384)
QUICK_M_SWEEP: tuple[int, ...] = (1, 16, 128, 512, 2048, 8192)
FULL_SQUARES: tuple[int, ...] = (128, 256, 512, 1024, 2048, 4096, 8192, 16384)
QUICK_SQUARES: tuple[int, ...] = (128, 256, 512, 1024, 2048, 4096, 8192)


@dataclass(frozen=True)
class Plan:
    device: str  # "cpu" | "cuda"
    quick: bool
    dtypes: tuple[str, ...]
    squares: tuple[int, ...]
    projections: tuple[tuple[int, int, str], ...]
    m_sweep: tuple[int, ...]
    warmup: int
    reps: int
    # A GEMM point whose predicted time per call exceeds this is recorded as skipped, not run.
    point_budget_s: float
    # Wall-clock budget of the whole GEMM sweep; what does not fit is recorded as skipped.
    gemm_budget_s: float
    # Rotating GEMM operand sets: enough copies that one pass over them exceeds this many bytes
    # (2x the last cache), but never more than rotate_cap_bytes in total.
    rotate_target_bytes: int
    rotate_cap_bytes: int
    stream_buffer_bytes: int
    ladder_sizes: tuple[int, ...]
    ladder_bytes_per_call: int
    min_sample_s: float
    spin_up_s: float
    # Side of the square products the spin-up runs (a GPU's clocks need real work; a CPU's 1024² is enough).
    spin_up_size: int
    sections: tuple[str, ...] = ("gemm", "stream", "ladder")
    notes: tuple[str, ...] = field(default_factory=tuple)
    # What a point's time is: "median" of its samples, or "best" (the fastest sample, STREAM's convention:
    # another process can only slow a sample down, so the fastest is the one it disturbed least).
    statistic: str = "median"
    # A cache level's bandwidth: the median of its window's `level_top_k` fastest points (0: of all of them).
    level_top_k: int = 0
    # Streams timed chunk by chunk (0: whole buffers per call): each sample one chunk, the samples walking
    # through the buffers, so every chunk comes from DRAM and a sample is short enough to run between two
    # preemptions of a shared CPU.
    stream_chunk_bytes: int = 0

    @property
    def timing(self) -> str:
        """How a point is timed, for the profile's sources: 'median of 7' / 'best of 5'."""
        return f"{self.statistic} of {self.reps}"


# The CPU's sampling: the fastest of many short samples per point (2 ms: on a CPU shared by ~10 runnable
# processes the scheduler's slices are a few ms, so a 20 ms sample is always preempted and a 2 ms one often
# is not), a level the median of its CPU_LEVEL_TOP_K fastest points, DRAM streams in 8 MiB chunks.
# docs/readme/measure.md ("Stability") has the runs this was chosen from and what two runs agree to.
CPU_QUICK_REPS = 15
CPU_FULL_REPS = 25
CPU_MIN_SAMPLE_S = 2e-3
CPU_LEVEL_TOP_K = 3
CPU_STREAM_CHUNK_BYTES = 8 * MIB


def longer(plan: Plan) -> Plan:
    """The same sweep run longer, for a second try when the first failed its physics check: twice the
    samples per point (more chances of an undisturbed one), one more warm-up, twice the spin-up and half
    as much again GEMM budget."""
    return dataclasses.replace(plan, reps=2 * plan.reps, warmup=plan.warmup + 1, spin_up_s=2 * plan.spin_up_s,
                               gemm_budget_s=1.5 * plan.gemm_budget_s,
                               notes=(*plan.notes, "a second, longer run: the first failed its physics "
                                                   "check"))


def ladder_sizes(last_cache_bytes: int, *, start_bytes: int = 16 * KIB, step: int = 2) -> tuple[int, ...]:
    """Working sets from start_bytes by powers of `step`, up to and including the first size that is at
    least 4x the last-level cache (that one is rounded to a whole MiB, not to a power of two)."""
    stop = 4 * last_cache_bytes
    sizes: list[int] = []
    size = start_bytes
    while size < stop:
        sizes.append(size)
        size *= step
    sizes.append(int(math.ceil(stop / MIB) * MIB) if stop > start_bytes else start_bytes)
    return tuple(sorted(set(sizes)))


def make_plan(
    device: str,
    *,
    quick: bool,
    dtypes: tuple[str, ...],
    last_cache_bytes: int,
    free_memory_bytes: int,
    sections: tuple[str, ...] = ("gemm", "stream", "ladder"),
) -> Plan:
    """The sweep for one device. `last_cache_bytes` is the last-level cache (CPU L3, GPU L2);
    `free_memory_bytes` bounds every buffer so a run never pushes the host or the card into swap/OOM."""
    gpu = device == "cuda"
    notes: list[str] = []
    # Streams: three buffers (triad), each far larger than the last cache.
    multiple = 2 if (quick and not gpu) else 4
    stream_bytes = max(multiple * last_cache_bytes, (1 * GIB) if gpu else 256 * MIB)
    budget = free_memory_bytes // 8  # three stream buffers plus GEMM operands stay well inside free memory
    if stream_bytes > budget:
        notes.append(
            f"stream buffers limited to {budget / MIB:.0f} MiB by free memory "
            f"({budget / max(last_cache_bytes, 1):.1f}x the last cache instead of {multiple}x)"
        )
        stream_bytes = budget
    stream_bytes -= stream_bytes % (4 * KIB)
    sizes = ladder_sizes(last_cache_bytes)
    fitting = tuple(s for s in sizes if s <= 3 * stream_bytes)  # the ladder reads views of the stream pool
    if len(fitting) < len(sizes):
        notes.append(f"cache ladder stops at {fitting[-1] / MIB:.0f} MiB (free memory), "
                     "short of 4x the last cache")
    if gpu:
        return Plan(
            device=device, quick=quick, dtypes=dtypes,
            squares=QUICK_SQUARES if quick else FULL_SQUARES,
            projections=LLAMA31_8B_PROJECTIONS,
            m_sweep=QUICK_M_SWEEP if quick else FULL_M_SWEEP,
            warmup=3 if quick else 10, reps=7 if quick else 25,
            point_budget_s=0.25 if quick else 2.0, gemm_budget_s=90.0 if quick else 1200.0,
            rotate_target_bytes=2 * last_cache_bytes, rotate_cap_bytes=4 * GIB,
            stream_buffer_bytes=stream_bytes, ladder_sizes=fitting,
            ladder_bytes_per_call=1 * GIB, min_sample_s=1e-3, spin_up_s=1.0 if quick else 3.0,
            spin_up_size=4096,
            sections=sections, notes=tuple(notes),
        )
    return Plan(
        device=device, quick=quick, dtypes=dtypes,
        squares=QUICK_SQUARES if quick else FULL_SQUARES,
        projections=LLAMA31_8B_PROJECTIONS,
        m_sweep=QUICK_M_SWEEP if quick else FULL_M_SWEEP,
        warmup=1 if quick else 3, reps=CPU_QUICK_REPS if quick else CPU_FULL_REPS,
        point_budget_s=0.5 if quick else 5.0, gemm_budget_s=20.0 if quick else 900.0,
        rotate_target_bytes=2 * last_cache_bytes, rotate_cap_bytes=(128 if quick else 1024) * MIB,
        stream_buffer_bytes=stream_bytes, ladder_sizes=fitting,
        ladder_bytes_per_call=(16 if quick else 128) * MIB, min_sample_s=CPU_MIN_SAMPLE_S,
        spin_up_s=0.5 if quick else 2.0, spin_up_size=1024,
        sections=sections, notes=tuple(notes), statistic="best", level_top_k=CPU_LEVEL_TOP_K,
        stream_chunk_bytes=CPU_STREAM_CHUNK_BYTES,
    )
