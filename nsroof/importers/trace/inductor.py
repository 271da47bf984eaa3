"""What nsroof.profile recorded of the kernels Inductor generated during the run (the trace's
``nsroof.inductor`` facts, written by nsroof.collectors.inductor_kernels): each fused kernel's module path
for its rows, and the records themselves for the costing (nsroof.costs.fused_kernels), handed over in the
ops table's attrs (``fused_kernels``).

A kernel's module: Inductor's FX nodes carry the module stack of the code they came from, relative to the
compiled frame's root. The root is the module class named in that stack when the compiled function reached
the model through a variable (``torch.compile(step)``: ``L['model']`` of class ``Llama``); when the model
itself was compiled its root is the compiled module, named by the module range the kernel's row already
sits in (``Llama``). Either way the path reads like an eager run's: ``Llama.layers.0.mlp``.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd

# Dynamo's and AOTAutograd's own ranges around a compilation (torch/_dynamo/utils.py dynamo_timed, recorded
# as cpu_op events while a profiler runs): a frame's compile, a backward graph's lazy compile
COMPILE_RANGE = re.compile(r"entire_frame_compile|entire_backward_compile|"
                           r"_compile\.compile_inner(?: \(dynamo_timed\))?")


def kernel_records(meta: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The recorded kernels by their name in the trace ({} when the run recorded none)."""
    facts = meta.get("inductor")
    kernels = facts.get("kernels") if isinstance(facts, dict) else None
    if not isinstance(kernels, dict):
        return {}
    return {str(k): v for k, v in kernels.items() if isinstance(v, dict)}


def module_path(record: dict[str, Any], enclosing: str) -> str:
    """The kernel's module path: its root (the class its module stack names, else the enclosing module
    range's path) and the path below the root where its nodes' modules meet."""
    root, below = str(record.get("root") or ""), str(record.get("module") or "")
    base = root or enclosing
    if not below:
        return base
    return f"{base}.{below}" if base else below


def with_kernel_modules(frame: pd.DataFrame, records: dict[str, dict[str, Any]], name_column: str,
                        module_column: str = "module", done: np.ndarray | None = None) -> pd.DataFrame:
    """`frame` with the module of each row named by a recorded kernel set from its record (but the rows
    `done` already has)."""
    if not records or not len(frame) or name_column not in frame or module_column not in frame:
        return frame
    names = frame[name_column].astype(str).to_numpy()
    named = pd.Series(names).isin(records.keys()).to_numpy()
    at = np.flatnonzero(named & ~done if done is not None else named)
    if not len(at):
        return frame
    modules = frame[module_column].astype(object).to_numpy().copy()
    for i in at.tolist():
        enclosing = modules[i] if isinstance(modules[i], str) else ""
        modules[i] = module_path(records[names[i]], enclosing)
    frame[module_column] = pd.Series(modules, index=frame.index, dtype=object)
    return frame


def compile_spans(ops: Sequence[Any], spans: Sequence[tuple[float, float]]) -> list[tuple[float, float]]:
    """(start, end) µs of each of torch.compile's compilations in the trace (COMPILE_RANGE)."""
    return [spans[i] for i, op in enumerate(ops) if COMPILE_RANGE.fullmatch(str(op.name))]


def skips_compile_steps(meta: dict[str, Any]) -> bool:
    """Whether the profile asked for the steps that compile to be left out (nsroof profile's default; its
    --compile-steps keeps them); a trace nsroof did not record keeps everything."""
    steps = meta.get("steps")
    return isinstance(steps, dict) and steps.get("compile_steps") == "skip"


def extended_steps(meta: dict[str, Any]) -> int:
    """How many steps nsroof.profile recorded beyond its window because a step in it compiled."""
    steps = meta.get("steps")
    value = steps.get("compile_extended", 0) if isinstance(steps, dict) else 0
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0


def without_compile_steps(frame: pd.DataFrame, starts: np.ndarray, bounds: list[float],
                          compiles: list[tuple[float, float]], facts: dict[str, Any]
                          ) -> tuple[pd.DataFrame, np.ndarray]:
    """The rows outside torch.compile's compilations: with step marks, every step in which a compilation
    started (its first run pays for the compile, the allocator's growth, the caches); without, the rows
    inside a compilation (the compiler's own op calls: fake-tensor tracing, its passes). `facts` (the
    report's steps facts) gets what was left out."""
    starts = np.asarray(starts, dtype="float64")
    if bounds:
        marks = np.asarray(bounds, dtype="float64")
        compiled = np.unique(np.searchsorted(marks, [s for s, _ in compiles], side="right"))
        index = np.searchsorted(marks, starts, side="right")
        drop = np.isin(index, compiled)
        facts["compile_steps"] = [int(i) + 1 for i in compiled.tolist()]  # numbered as the `step` column
    else:
        drop = np.zeros(len(starts), dtype=bool)
        for lo, hi in compiles:
            drop |= (starts >= lo) & (starts <= hi)
    facts["compile_rows_left_out"] = int(drop.sum())
    if not drop.any():
        return frame, starts
    keep = ~drop
    return frame[keep].reset_index(drop=True), starts[keep]


# the range Inductor's compiled module opens around each run of a generated graph
# (torch/_inductor/output_code.py: "## Call CompiledFxGraph <key>")
GRAPH_CALL = "## Call CompiledFxGraph"


def call_modules(frame: pd.DataFrame, starts: np.ndarray, regions: list[tuple[float, float]],
                 calls: dict[str, list[dict[str, Any]]]) -> tuple[pd.DataFrame, np.ndarray, int, int]:
    """The module of every row a generated graph's run called (its fused kernels and its extern ops: mm,
    addmm, attention), from the order its wrapper calls them in: in each run of a graph (a GRAPH_CALL
    region), the rows named like the recorded calls must be exactly the recorded sequence of one graph,
    else the region is left as it was. Returns the frame, the rows given a module, the regions matched and
    those not."""
    done = np.zeros(len(frame), dtype=bool)
    if not calls or not regions or not len(frame):
        return frame, done, 0, 0
    sequences = {tuple(c["op"] for c in seq): seq for seq in calls.values() if seq}
    names = frame["op"].astype(str).to_numpy()
    wanted = {n for seq in sequences for n in seq}
    candidate = np.flatnonzero(pd.Series(names).isin(wanted).to_numpy())
    order = candidate[np.argsort(np.asarray(starts, dtype="float64")[candidate], kind="stable")]
    at_start = np.asarray(starts, dtype="float64")[order]
    modules = frame["module"].astype(object).to_numpy().copy()
    matched = unmatched = 0
    for lo, hi in regions:
        rows = order[(at_start >= lo) & (at_start <= hi)]
        seq = sequences.get(tuple(names[rows].tolist()))
        if seq is None:
            unmatched += 1 if len(rows) else 0
            continue
        matched += 1
        for i, call in zip(rows.tolist(), seq, strict=True):
            enclosing = modules[i] if isinstance(modules[i], str) else ""
            modules[i] = module_path(call, _outside(enclosing, call))
        done[rows] = True
    frame["module"] = pd.Series(modules, index=frame.index, dtype=object)
    return frame, done, matched, unmatched


def _outside(enclosing: str, call: dict[str, Any]) -> str:
    """The enclosing module a call's path continues (a row's module may already be the call's own)."""
    below = str(call.get("module") or "")
    return enclosing[: -len(below) - 1] if below and enclosing.endswith("." + below) else enclosing
