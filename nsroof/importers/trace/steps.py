"""Where each recorded step's wall time went (nsroof.schema.STEP_TIME_COLUMNS): CPU ops, the gaps between
them, the DataLoader, and the GPU busy or idle, as HTA's temporal breakdown reads a trace.

The steps: torch.profiler's ``ProfilerStep#N`` ranges; else an engine's step annotations (vLLM/SGLang
``execute_…_context_…_generation_…``); else nsroof.profile's step marks (step i ends at the i-th mark, step 1
begins with the first op). Op time is the union of the op calls on every thread, record_function ranges that
only label a stretch (steps, the DataLoader, Optimizer.step, ``## … ##`` ranges) left out, so that what no op
covers is what the step spent in Python, launching, or waiting.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd

from nsroof.counters.timeline import covered_us, gaps_us, merged
from nsroof.importers.trace.events import Activity, Op
from nsroof.importers.trace.op_tree import OpTree, numbers, span
from nsroof.names.nvtx_paths import STEP_RANGE

#: a gap between ops this long is a wait, not launch overhead: a kernel launch costs the host ~5-10 µs
#: (CUDA C Best Practices Guide, "Kernel launch overhead"), so 1 ms is more than 100 launches
WAIT_GAP_US = 1000.0
DATALOADER = "enumerate(DataLoader)"
ENGINE_STEP = re.compile(r"^execute(?:_\d+)?_context_\d+\(.*\)_generation_\d+\(.*\)$")
# record_function ranges recorded as ops by older traces (cat Operator): they label a stretch, run nothing
LABEL_ONLY = re.compile(r"^(ProfilerStep#\d+|enumerate\(DataLoader\)#.*|Optimizer\.\w+#.*|## .* ##)$")


def step_windows(tree: OpTree, annotations: Sequence[Op], marks: Sequence[float],
                 kept: tuple[int, int | None] = (0, None)) -> list[tuple[str, float, float]]:
    """(step, start µs, end µs) of every recorded step, in time order (see the module docstring); of the
    steps from marks those the report keeps, `kept` = (warm-up steps, steps: None for all)."""
    named = [(e.name, *span(e)) for e in annotations] + [
        (op.name, *tree.spans[i]) for i, op in enumerate(tree.ops) if op.name.startswith("ProfilerStep#")]
    steps = [(m.group("n"), s, e) for name, s, e in named if (m := STEP_RANGE.match(name)) and e > s]
    if not steps:
        steps = [(name, s, e) for name, s, e in named if ENGINE_STEP.match(name) and e > s]
    if not steps and len(marks) and len(tree.spans):
        first = float(np.nanmin(np.asarray(tree.spans, dtype="float64")[:, 0]))
        starts = [min(first, marks[0]), *marks[:-1]]
        # the steps the report keeps (--warmup/--steps count marked steps): the others are not its time
        last = len(marks) if kept[1] is None else min(len(marks), kept[0] + kept[1])
        steps = [(str(i + 1), float(starts[i]), float(marks[i])) for i in range(kept[0], last)
                 if marks[i] > starts[i]]
    return sorted(set(steps), key=lambda t: (t[1], t[2]))


def _op_pieces(tree: OpTree) -> tuple[np.ndarray, np.ndarray]:
    names = pd.Series([op.name for op in tree.ops], dtype=object)
    codes, distinct = pd.factorize(names)
    label = np.array([LABEL_ONLY.match(str(n)) is not None for n in distinct], dtype=bool)
    times = np.asarray(tree.spans, dtype="float64").reshape(-1, 2)
    keep = ~label[codes] if len(codes) else np.zeros(0, dtype=bool)
    return merged(times[keep, 0], times[keep, 1])


def accounting(tree: OpTree, annotations: Sequence[Op], activities: Sequence[Activity],
               launched_us: np.ndarray, marks: Sequence[float],
               kept: tuple[int, int | None] = (0, None)) -> list[dict[str, Any]]:
    """One record per step (STEP_TIME_COLUMNS; None where a quantity is unknown); [] when the trace marks no
    steps. `launched_us`: when each activity was launched (its runtime call; NaN: not recorded, then its own
    start): a step's GPU work is what it launched, however late the GPU ran it (a graph replay, a queue)."""
    windows = step_windows(tree, annotations, marks, kept)
    if not windows:
        return []
    ops = _op_pieces(tree)
    loader = merged(*np.asarray([span(e) for e in annotations if e.name.startswith(DATALOADER)]
                                + [tree.spans[i] for i, op in enumerate(tree.ops)
                                   if op.name.startswith(DATALOADER)], dtype="float64").reshape(-1, 2).T)
    gpu_start = numbers([a.ts for a in activities])
    gpu_end = gpu_start + np.maximum(numbers([a.dur for a in activities]), 0.0)
    launched = np.where(np.isnan(launched_us), gpu_start, launched_us)
    out = []
    for step, lo, hi in windows:
        wall = hi - lo
        op = covered_us(ops, lo, hi)
        gaps = gaps_us(ops, lo, hi)
        waits = float(gaps[gaps >= WAIT_GAP_US].sum())
        mine = (launched >= lo) & (launched < hi)
        kernel = float(np.nansum(gpu_end[mine] - gpu_start[mine]))
        busy = covered_us(merged(gpu_start[mine], gpu_end[mine]), -np.inf, np.inf)
        # the GPU's stretch of the step: from its start to the end of the last work it launched
        span_us = max(hi, float(np.nanmax(gpu_end[mine]))) - lo if mine.any() else wall
        out.append({
            "step": step, "start_us": lo, "wall_s": wall * 1e-6, "op_s": op * 1e-6,
            "outside_ops_s": (wall - op) * 1e-6, "outside_ops_share": (wall - op) / wall,
            "waits_s": waits * 1e-6, "between_ops_s": (wall - op - waits) * 1e-6,
            "longest_gap_s": float(gaps.max()) * 1e-6 if len(gaps) else 0.0,
            "dataloader_s": covered_us(loader, lo, hi) * 1e-6,
            "kernel_s": kernel * 1e-6 if len(activities) else None,
            "gpu_busy_s": busy * 1e-6 if len(activities) else None,
            "gpu_idle_s": (span_us - busy) * 1e-6 if len(activities) else None,
        })
    return out
