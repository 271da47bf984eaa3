"""torch.profiler / Kineto chrome traces (.json, .json.gz) -> the normalized kernel table.

One row per GPU activity (the correlation rules are in nsroof.importers.trace.op_tree and
docs/readme/collectors.md):
  * ``kind``: ``kernel`` for cat ``kernel`` (``Kernel`` in 2021 traces), ``memcpy``/``memset`` for
    ``gpu_memcpy``/``gpu_memset`` (``Memcpy``/``Memset``). Only kernels carry analytic costs: a copy is
    never classified as compute. ``cuda_sync`` events (Context Sync on stream 4294967295) are not rows;
  * ``gpu__time_duration.sum`` = ``dur`` (µs, fractional) × 1e-6 s, so durations flow through the same
    formula as ncu exports; a negative or non-finite ``dur`` gives NaN and a warning;
  * ``launch__registers_per_thread`` and ``launch__shared_mem_per_block`` from the kernel's args, grid/block
    as '(x, y, z)', stream, context, device and cc (from ``deviceProperties`` when the trace has them);
  * ``op``, ``input_shapes``, ``nvtx_path``/``nvtx_ranges`` and ``module`` of the op that launched it, and
    ``op_link``: how the op was found (``external id``, ``enclosing op``, ``kernel external id``, ``none``);
  * ``op_id``: the innermost op that launched it, a row of the ops table returned as ``FileFacts.ops``
    (nsroof.schema.OP_COLUMNS). Which formula prices which kernel is nsroof.costs.attribution's job.

A trace without GPU activity (a CPU run) gives one row per op call (``kind`` ``cpu_op``, ``op_id`` the op
itself, its whole time); nsroof.costs.attribution keeps the rows that count the op time once.

Traces without kernel events but with CUPTI range-profiler counters (cat ``cuda_profiler_range``,
torch.profiler's experimental profiler_metrics) give one row per range with those counters as metric
columns and no duration: the ranges' ``dur`` is the profiling window, not the kernel time.

nsroof.profile records what the trace alone cannot say under the trace's top-level key ``nsroof``
(``prof.add_metadata_json``): the module range names, the step window, the TF32 settings. Read here, so
``nsroof analyze trace.json`` gives the report the live profile gave.
"""

from __future__ import annotations

import math
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any, TypeGuard

import numpy as np
import pandas as pd

from nsroof.frames.arrays import nonnegative_or_missing, row_numbers
from nsroof.importers.kernel_table import empty_identity
from nsroof.importers.trace import graphs, inductor, inductor_cache, steps, triton_estimates
from nsroof.importers.trace import unrecorded as unrecorded_launches
from nsroof.importers.trace.events import (
    Activity,
    Launch,
    Op,
    RangeEvent,
    Trace,
    TraceEvents,
    comms_attributes,
    triton_attributes,
)
from nsroof.importers.trace.load import load, load_ranges, paused_gc
from nsroof.importers.trace.op_tree import (
    LINK_ENCLOSING,
    STEP_MARKER,
    OpTree,
    external_id,
    number,
    numbers,
    per_object,
    shape_text,
    span,
)
from nsroof.schema import FileFacts

KINDS: dict[str, str] = {  # cat (trace_schema.ACTIVITY_CATS) -> kind of GPU activity row
    "kernel": "kernel", "Kernel": "kernel",
    "gpu_memcpy": "memcpy", "Memcpy": "memcpy",
    "gpu_memset": "memset", "Memset": "memset",
    "cuda_graph": "graph",  # a whole CUDA graph's execution (Nsight Systems' whole-graph trace)
}

METRIC_UNITS = {
    "gpu__time_duration.sum": "second",
    "launch__registers_per_thread": "register/thread",
    "launch__shared_mem_per_block": "byte/block",
}


def _num(value: Any) -> float:
    return number(value)


def _is_int(v: Any) -> TypeGuard[int]:
    return isinstance(v, int) and not isinstance(v, bool) and -(1 << 63) <= v < (1 << 63)


def _stream(event: Activity) -> int | None:
    """The stream id: an integer (CUDA), a string (ROCm writes "0x0"; 2021 traces' tid "stream 7"); <NA>
    when none parses or it does not fit 64 bits (no roofline number reads the stream)."""
    for value in (event.args.stream, event.tid):
        if isinstance(value, int):
            return value
        if isinstance(value, str) and value.split():
            word = value.split()[-1]
            try:
                number = (int(word, 16) if word.lower().startswith("0x")
                          else int(word) if word.isdigit() else None)
            except ValueError:
                continue
            if number is not None and _is_int(number):
                return number
    return None


def _dim3(value: Any) -> str:
    if isinstance(value, list) and len(value) == 3:
        return f"({value[0]}, {value[1]}, {value[2]})"
    return ""


# --------------------------------------------------------------------------- what nsroof.profile recorded


def trace_meta(top: Trace) -> dict[str, Any]:
    """The facts nsroof.profile wrote under the trace's top-level 'nsroof' key ({} for other traces)."""
    return top.nsroof or {}


def tf32_policy(meta: dict[str, Any]) -> tuple[bool | None, bool | None]:
    """(matmul TF32 allowed, cuDNN conv TF32 allowed); None where the trace does not say."""
    tf32 = meta.get("tf32")
    if not isinstance(tf32, dict):
        return None, None
    matmul, cudnn = tf32.get("matmul"), tf32.get("cudnn")
    return (matmul if isinstance(matmul, bool) else None), (cudnn if isinstance(cudnn, bool) else None)


def step_window(meta: dict[str, Any], annotations: list[Op]) -> tuple[str, list[float], int, int | None]:
    """(step source, sorted boundary times µs, warmup, steps) from the step markers nsroof.profile put in
    the trace (``nsroof::step#<source>#<n>``): nsroof.step() marks when there are any, else optimizer
    steps."""
    marks: dict[str, list[float]] = {"nsroof": [], "optimizer": []}
    for a in annotations:
        if a.name.startswith(STEP_MARKER + "#"):
            parts = a.name.split("#")
            marks.setdefault(parts[1] if len(parts) > 1 else "", []).append(_num(a.ts))
    source = "nsroof" if marks["nsroof"] else ("optimizer" if marks["optimizer"] else "")
    window: dict[str, Any] = meta["steps"] if isinstance(meta.get("steps"), dict) else {}
    warmup, steps = window.get("warmup"), window.get("steps")
    return ((f"{source} steps" if source else ""), sorted(marks.get(source, [])),
            warmup if _is_int(warmup) else 0, steps if _is_int(steps) else None)


def in_window(starts_us: np.ndarray, bounds: list[float], warmup: int, steps: int | None) -> np.ndarray:
    """Which rows started in steps [warmup, warmup + steps); step i ends at the i-th boundary."""
    index = np.searchsorted(np.asarray(bounds, dtype=float), np.asarray(starts_us, dtype=float), side="right")
    return (index >= warmup) & (index < (math.inf if steps is None else warmup + steps))


# --------------------------------------------------------------------------- read


def read(path: str | os.PathLike[str], *,
         captures: Sequence[str | os.PathLike[str]] = ()) -> tuple[pd.DataFrame, FileFacts]:
    """The kernel table of a trace and its facts (the ops table in facts.ops). `captures`: traces recorded
    around the capture of the graphs this trace replays (nsroof.importers.trace.graphs)."""
    with paused_gc():
        return _read(path, captures)


def _read(path: str | os.PathLike[str],
          captures: Sequence[str | os.PathLike[str]]) -> tuple[pd.DataFrame, FileFacts]:
    return from_events(load(path), Path(path).name, path=path, captures=captures)


def from_events(events: TraceEvents, name: str, *, path: str | os.PathLike[str] | None = None,
                captures: Sequence[str | os.PathLike[str]] = (),
                fmt: str = "torch-trace",
                capture_hint: str = graphs.CAPTURE_HINT) -> tuple[pd.DataFrame, FileFacts]:
    """The kernel table and facts of a trace's events, whichever file they were read from: a kineto trace
    (`path`, read again for its range-profiler counters) or another timeline in the same schema (an Nsight
    Systems export, nsroof.importers.nsys), so one set of correlation rules links them all. `capture_hint`:
    what to do for graph-replayed kernels no capture maps."""
    top = events.top
    activities = in_order(events.activities)
    meta = trace_meta(top)
    warnings: list[str] = []
    extra: dict[str, Any] = {}
    ops = None
    if not activities and events.ranges and path is not None:
        frame = _profiler_ranges(load_ranges(path), top, name)
        warnings.append(f"{len(frame)} CUPTI range-profiler rows and no kernel events: counters only, no "
                        "kernel durations (a range's dur is the profiling window)")
    else:
        launches = launch_map(events.launches, activities)
        # no GPU kernel recorded: every kernel launch is a row of unknown duration (trace.unrecorded)
        kernels = any(KINDS[a.cat] == "kernel" for a in activities)
        unrecorded = [] if kernels else unrecorded_launches.kernel_launches(events.launches)
        linked = {x for e in [*launches.values(), *unrecorded] if (x := external_id(e.args)) is not None} | {
            x for a in activities if (x := external_id(a.args)) is not None}
        tree, annotations = op_tree(events, meta, linked)
        del events  # the tree, the launches and the activities hold what is read from here on
        caps: list[graphs.Capture] = []
        if activities or unrecorded:
            extra.update(gpu_facts(top))
        if activities:
            frame, starts = _gpu_rows(activities, launches, tree, top, name, warnings)
            caps = [load_capture(k, c) for k, c in enumerate(captures)]
            frame = graphs.apply(frame, activities, launches, tree, caps, warnings, extra, capture_hint)
            extra["tf32"] = tf32_facts(meta)
        if unrecorded:  # launches, no kernel event: the launches are the kernels, of unknown duration
            warnings.append(unrecorded_launches.missing_fact(unrecorded) + ": every kernel's duration is NaN")
            rows, at = unrecorded_launches.launch_rows(unrecorded, tree, _devices(top), name)
            frame, starts = ((pd.concat([frame, rows], ignore_index=True), np.concatenate([starts, at]))
                             if activities else (rows, at))
        if activities or unrecorded:  # a replayed kernel's launch record is in its capture trace
            frame = triton_estimates.read(frame, tree, caps)
        else:
            frame, starts = _cpu_rows(tree, name, meta)
            if captures:
                warnings.append("no GPU kernels in the trace (a CPU run): --capture maps nothing")
            if not len(frame):
                warnings.append("no kernel events (cat 'kernel') and no CPU ops: nothing to classify")
        _, marks, warmup, kept = step_window(meta, annotations)
        launched = numbers([launches[c].ts if (c := a.args.correlation) in launches else None
                            for a in activities])
        step_time = steps.accounting(tree, annotations, activities, launched, marks, (warmup, kept))
        if step_time:
            extra["step_time"] = step_time
        del activities, launches, linked  # in the kernel rows now: freed before the ops table is built
        frame = _select_steps(frame, starts, meta, annotations, warnings, extra,
                              inductor.compile_spans(tree.ops, tree.spans))
        frame["kernel_id"] = row_numbers(len(frame))
        ops = graphs.ops_table(tree, name, caps)
        # Inductor's kernels as nsroof.profile recorded them: their modules here, their costs in the costing
        fused = inductor.kernel_records(meta)
        if fused:
            frame = _inductor_modules(frame, ops, fused, meta, annotations, extra)
            ops.attrs["fused_kernels"] = fused
        # facts the ledger's collective formulas read beside the ops' arguments (nsroof.costs.attribution)
        ops.attrs["world_size"] = _world_size(top)
        ops.attrs["op_attributes"] = op_attributes(tree, caps)
    units = {c: u for c, u in METRIC_UNITS.items() if c in frame.columns} | {
        c: "" for c in frame.columns if c.startswith(("smsp__", "sm__"))}
    return frame, FileFacts(format=fmt, source=name, metric_units=units, warnings=warnings,
                            levels=("dram",), extra=extra, ops=ops)


def op_attributes(tree: OpTree, captures: Sequence[graphs.Capture] = ()) -> dict[int, dict[str, Any]]:
    """The attributes the ledger reads beside an op's arguments, by op_id (a capture trace's ops past the
    trace's own, as graphs.ops_table numbers them): record_param_comms' message, an Inductor Triton launch's
    kernel_kwargs, grid and estimates, with its kernel file's facts where that file is here."""
    files: dict[Any, dict[str, Any]] = {}  # each kernel file looked up once

    def of(t: OpTree, offset: int) -> dict[int, dict[str, Any]]:
        out: dict[int, dict[str, Any]] = {}
        for i, (op, a) in enumerate(zip(t.ops, t.args, strict=True)):
            if op.name == "record_param_comms":
                out[i + offset] = comms_attributes(a)
            elif found := triton_attributes(a):
                path = found.get("kernel_file")
                if path not in files:
                    files[path] = inductor_cache.facts(path)
                out[i + offset] = found | ({"kernel_file_facts": files[path]} if files[path] else {})
        return out

    attributes = of(tree, 0)
    for c in captures:
        own = of(c.tree, 0)
        attributes |= {i + c.offset: a for i, a in own.items()}
        for copy in c.copies:  # each replay's copies of the captured ops (graphs.ops_table)
            attributes |= {op_id: own[row] for row, op_id in copy.op_ids().items() if row in own}
    return attributes


def _inductor_modules(frame: pd.DataFrame, ops: pd.DataFrame, fused: dict[str, dict[str, Any]],
                      meta: dict[str, Any], annotations: list[Op], extra: dict[str, Any]) -> pd.DataFrame:
    """The modules of the rows a compiled graph ran: each call's from the recorded call order (CPU rows),
    else a fused kernel's from its record; copied to the ops table (nsroof.importers.trace.inductor)."""
    if "kind" in frame and (frame["kind"].astype(str) == "cpu_op").all() and "op_id" in frame:
        regions = [span(a) for a in annotations if a.name.startswith(inductor.GRAPH_CALL)]
        calls = meta["inductor"].get("calls") if isinstance(meta.get("inductor"), dict) else None
        starts = ops.set_index("op_id")["start_us"].reindex(frame["op_id"].astype("int64")).to_numpy()
        frame, done, matched, unmatched = inductor.call_modules(frame, starts, regions, calls or {})
        frame = inductor.with_kernel_modules(frame, fused, "op", done=done)
        extra["inductor"] = {"graph_runs_matched": matched, "graph_runs_unmatched": unmatched}
        module = dict(zip(frame["op_id"].astype("int64").tolist(), frame["module"].tolist(), strict=True))
        ops["module"] = [module.get(int(i), m) for i, m in zip(ops["op_id"].tolist(), ops["module"].tolist(),
                                                                 strict=True)]
    else:
        frame = inductor.with_kernel_modules(frame, fused, "op")
        inductor.with_kernel_modules(ops, fused, "name")
    return frame


def _world_size(top: Trace) -> int:
    """distributedInfo.world_size of a kineto trace (0 when absent)."""
    info = top.distributedInfo
    size = info.get("world_size") if isinstance(info, dict) else None
    return size if isinstance(size, int) and not isinstance(size, bool) and size > 0 else 0


def in_order(activities: list[Activity]) -> list[Activity]:
    """GPU activities in the kernel table's row order: by start, then correlation (a stable sort: ties in
    file order; sorted()'s own order where a key is NaN, which numpy would order differently)."""
    starts, correlations = (numbers([e.ts for e in activities]),
                            numbers([e.args.correlation for e in activities]))
    if np.isnan(starts).any() or np.isnan(correlations).any():
        return sorted(activities, key=lambda e: (_num(e.ts), _num(e.args.correlation)))
    return [activities[i] for i in np.lexsort((correlations, starts)).tolist()]


def launch_map(launches: list[Launch], activities: list[Activity]) -> dict[int, Launch]:
    """correlation -> the runtime/driver event that launched one of the activities (trace_ops rule 1); the
    other launches (most of a trace's runtime calls launch nothing) are not kept."""
    wanted = {c for e in activities if (c := e.args.correlation) is not None}
    out: dict[int, Launch] = {}
    for e in launches:
        corr = e.args.correlation
        if corr in wanted:
            out.setdefault(corr, e)
    return out


def op_tree(events: TraceEvents, meta: dict[str, Any],
            linked_ids: set[int] | None = None) -> tuple[OpTree, list[Op]]:
    module_ranges = [str(n) for n in meta.get("module_ranges", []) if isinstance(n, str)]
    ops, annotations = split_module_ranges(events.ops, events.annotations, module_ranges)
    return OpTree(ops, annotations, module_ranges, linked_ids), annotations


def split_module_ranges(ops: list[Op], annotations: list[Op],
                        module_ranges: Sequence[str]) -> tuple[list[Op], list[Op]]:
    """nsroof.profile records module ranges with torch's fast C++ record function, which kineto writes as
    ``cpu_op`` events named by the module: those named in the trace's ``module_ranges`` fact are ranges
    (annotations), not ops."""
    names = set(module_ranges)
    ranges = [e for e in ops if e.name in names] if names else []
    if not ranges:
        return ops, annotations
    return [e for e in ops if e.name not in names], annotations + ranges


def load_capture(index: int, path: str | os.PathLike[str]) -> graphs.Capture:
    """A capture trace (--capture): its op tree, the graphs it captured, the node ids of its own replays."""
    events = load(path)
    tree, _ = op_tree(events, trace_meta(events.top))
    capture = graphs.Capture(Path(path).name, tree, graphs.capture_graphs(index, events.launches, tree))
    activities = in_order(events.activities)
    kinds, launches = [KINDS[e.cat] for e in activities], launch_map(events.launches, activities)
    graphs.learn_node_ids(capture, activities, kinds, launches)
    graphs.learn_eager_kernels(capture, activities, kinds, launches)
    return capture


def _select_steps(frame: pd.DataFrame, starts: np.ndarray, meta: dict[str, Any], annotations: list[Op],
                  warnings: list[str], extra: dict[str, Any],
                  compiles: list[tuple[float, float]] | None = None) -> pd.DataFrame:
    source, bounds, warmup, steps = step_window(meta, annotations)
    extra["steps"] = {"source": source, "marked": len(bounds), "warmup": warmup, "steps": steps}
    if bounds and len(frame):  # step i (from 1) ends at the i-th mark
        index = np.searchsorted(np.asarray(bounds, dtype=float), np.asarray(starts, dtype=float),
                                side="right")
        frame["step"] = pd.array(index + 1, dtype="Int64")
    recorded = len(frame)
    if compiles and inductor.skips_compile_steps(meta):
        frame, starts = inductor.without_compile_steps(frame, starts, bounds, compiles, extra["steps"])
        # a step torch.compile compiled in is warm-up however late it comes: nsroof.profile recorded one
        # more step for each such step in its window
        if steps is not None:
            steps += inductor.extended_steps(meta)
    if steps is None and not warmup:
        return frame
    if steps is None and not bounds:  # a warm-up counts steps: with none marked there is nothing to skip
        warnings.append(f"--warmup {warmup} not applied: the run marked no steps (no optimizer.step() and no "
                        "nsroof.step()), so every op is kept")
        extra["steps"] |= {"warmup": 0, "warmup_ignored": warmup}
        return frame
    keep = in_window(starts, bounds, warmup, steps)
    # the window the profile asked for is a fact of the file, not a warning: the summary states it, numbered
    # as the `step` column numbers its rows (step i from 1 ends at the i-th mark; warm-up steps 1..warmup)
    extra["steps"] |= {"window": f"{warmup + 1}..{warmup + steps if steps else 'end'}",
                       "kept": int(keep.sum()), "rows": recorded}
    return frame[keep].reset_index(drop=True)


def _devices(top: Trace) -> dict[int, tuple[str, str]]:
    out: dict[int, tuple[str, str]] = {}
    for d in top.deviceProperties or []:
        if d.id is not None:
            minor = "" if d.computeMinor is None else d.computeMinor
            out[d.id] = (d.name, f"{d.computeMajor}.{minor}" if d.computeMajor is not None else "")
    return out


def _positive(value: Any) -> int:
    return value if _is_int(value) and value > 0 else 0


def gpu_facts(top: Trace) -> dict[str, Any]:
    """What the trace records of its GPUs, once per model (a node's 8 identical devices are one): name,
    cc, SM (CU) count, memory, warp size, and the platform (nsroof.roofs.gpu_identity reads them)."""
    models: dict[tuple[Any, ...], dict[str, Any]] = {}
    for d in top.deviceProperties or []:
        minor = "" if d.computeMinor is None else d.computeMinor
        g = {"name": d.name, "cc": f"{d.computeMajor}.{minor}" if d.computeMajor is not None else "",
             "sm_count": _positive(d.numSms), "memory_bytes": _positive(d.totalGlobalMem),
             "warp_size": _positive(d.warpSize)}
        models.setdefault(tuple(g.values()), g)
    return ({"gpus": list(models.values())} if models else {}) | (
        {"gpu_platform": top.platform} if top.platform else {})


def _gpu_rows(activities: list[Activity], launches: dict[int, Launch], tree: OpTree,
              top: Trace, name: str, warnings: list[str]) -> tuple[pd.DataFrame, np.ndarray]:
    from nsroof.names.kernel_names import short_name

    n = len(activities)  # in_order already
    devices = _devices(top)
    cols = empty_identity(n, filled=("nvtx_ranges",))
    cols["source"] = [name] * n
    # every launch adopted before paths are located
    linked = [tree.launcher(k.args, launches) for k in activities]
    facts = tree.all_path_facts()
    # column by column: each a comprehension over the activities
    # (a per-row loop writing numpy cells is slower)
    kinds = [KINDS[k.cat] for k in activities]
    durations = numbers([k.dur for k in activities])
    valid = durations >= 0  # NaN compares False
    bad_dur = int(n - valid.sum())
    # chrome-trace dur is in µs whatever displayTimeUnit says
    dur_s = np.where(valid, durations * 1e-6, np.nan)
    registers = numbers([k.args.registers_per_thread for k in activities])
    shared = numbers([k.args.shared_memory for k in activities])
    cols["kernel_name"] = [k.name for k in activities]
    cols["function"] = [short_name(k.name) if kind == "kernel" else k.name
                        for k, kind in zip(activities, kinds, strict=True)]
    cols["grid"] = per_object(_dim3, (k.args.grid for k in activities))
    cols["block"] = per_object(_dim3, (k.args.block for k in activities))
    device_ids: list[int | None] = [
        d if isinstance(d := (k.args.device if k.args.device is not None else k.pid), int) else None
        for k in activities]
    js = [j for j, _ in linked]
    links = [link for _, link in linked]
    launcher = np.array(js, dtype=np.int64).reshape(-1)
    launch_of = [launches.get(c) if (c := k.args.correlation) is not None else None for k in activities]
    # when launched
    starts = numbers([(launch or k).ts for k, launch in zip(activities, launch_of, strict=True)])
    op_name = [tree.ops[j].name if j >= 0 else "" for j in js]
    shapes = per_object(shape_text, (tree.args[j].input_dims if j >= 0 else None for j in js))
    cols["nvtx_ranges"] = [facts[j][0] if j >= 0 else [] for j in js]
    cols["nvtx_path"] = [facts[j][1] if j >= 0 else "" for j in js]
    modules = [facts[j][2] if j >= 0 else "" for j in js]
    if bad_dur:
        warnings.append(f"{bad_dur} GPU event(s) with a negative or non-finite 'dur': duration NaN")
    flagged = sum(1 for link in links if link == LINK_ENCLOSING)
    if flagged and any(external_id(launch.args) is not None for launch in launches.values()):
        warnings.append(f"{flagged} GPU event(s) whose launch's External id names no op enclosing the launch "
                        "on its thread: linked to the innermost enclosing op instead "
                        "(op_link 'enclosing op')")
    cols["stream"] = pd.array([_stream(k) for k in activities], dtype="Int64")
    cols["context"] = pd.array([k.args.context for k in activities], dtype="Int64")
    cols["device_id"] = pd.array(device_ids, dtype="Int64")
    # ROCm numbers a kernel's device by its profiler agent (9) where deviceProperties counts GPUs (0..n-1):
    # an id not listed takes the one model every listed GPU is
    models = set(devices.values())
    only = models.pop() if len(models) == 1 else ("", "")
    cols["device"] = [devices.get(d, only)[0] if d is not None else "" for d in device_ids]
    cols["cc"] = [devices.get(d, only)[1] if d is not None else "" for d in device_ids]
    cols["process_id"] = pd.array([None] * n, dtype="Int64")
    frame = pd.DataFrame(cols, copy=False)
    frame["kind"] = pd.Series(kinds, dtype=object)
    frame["op_id"] = nonnegative_or_missing(launcher)
    frame["op_link"] = pd.Series(links, dtype=object)
    frame["op"] = pd.Series(op_name, dtype=object)
    frame["input_shapes"] = pd.Series(shapes, dtype=object)
    frame["module"] = pd.Series(modules, dtype=object)
    frame["gpu__time_duration.sum"] = dur_s
    frame["start_us"] = numbers([k.ts for k in activities])  # the activity's own
    frame["launch__registers_per_thread"] = registers
    frame["launch__shared_mem_per_block"] = shared
    return frame, starts


def tf32_facts(meta: dict[str, Any]) -> dict[str, Any]:
    """What the trace says of torch's TF32 switches (nsroof.costs.attribution applies them)."""
    matmul, cudnn = tf32_policy(meta)
    facts: dict[str, Any] = {"matmul_allowed": matmul, "cudnn_allowed": cudnn, "rows": 0}
    if matmul is None and cudnn is None:
        facts["applied"] = ("unknown: the trace does not record torch's TF32 settings; "
                            "fp32 matmul/conv judged as fp32")
    else:
        facts["applied"] = (f"fp32 matmul{'' if matmul else ' (not allowed)'} / "
                            f"conv{'' if cudnn else ' (not allowed)'} kernels on CC >= 8.0 judged against "
                            "the TF32 tensor roof where allowed")
    return facts


def _cpu_rows(tree: OpTree, name: str, meta: dict[str, Any]) -> tuple[pd.DataFrame, np.ndarray]:
    order = sorted(range(len(tree.ops)), key=lambda i: tree.spans[i][0])
    n = len(order)
    cols = empty_identity(n)
    cols["source"] = [name] * n
    device = str(meta.get("cpu", "")) if isinstance(meta.get("cpu", ""), str) else ""
    facts = tree.all_path_facts()
    names = [tree.ops[i].name for i in order]
    cols["kernel_name"] = cols["function"] = names
    cols["nvtx_ranges"] = [facts[i][0] for i in order]
    cols["nvtx_path"] = [facts[i][1] for i in order]
    cols["device"] = [device] * n
    frame = pd.DataFrame(cols, copy=False)
    frame["kind"] = pd.Series(["cpu_op"] * n, dtype=object)
    frame["op_id"] = pd.array(order, dtype="Int64")
    frame["op_link"] = pd.Series(["self"] * n, dtype=object)
    frame["op"] = pd.Series(names, dtype=object)
    frame["input_shapes"] = pd.Series(per_object(shape_text, (tree.args[i].input_dims for i in order)),
                                      dtype=object)
    frame["module"] = pd.Series([facts[i][2] for i in order], dtype=object)
    frame["duration_source"] = pd.Series(["cpu_op dur"] * n, dtype=object)
    frame["gpu__time_duration.sum"] = np.array([(tree.spans[i][1] - tree.spans[i][0]) * 1e-6 for i in order],
                                               dtype="float64")
    starts = np.array([tree.spans[i][0] for i in order], dtype="float64")
    return frame, starts


def _profiler_ranges(ranges: list[RangeEvent], top: Trace, name: str) -> pd.DataFrame:
    from nsroof.names.kernel_names import short_name

    ranges = sorted(ranges, key=lambda e: _num(e.ts))
    n = len(ranges)
    cols = empty_identity(n)
    cols["source"] = [name] * n
    cols["kernel_id"] = row_numbers(n)
    devices = _devices(top)
    for i, r in enumerate(ranges):
        kname = r.name
        cols["kernel_name"][i] = kname
        cols["function"][i] = short_name(kname)
        dev = r.pid
        if isinstance(dev, int) and dev in devices:
            cols["device"][i], cols["cc"][i] = devices[dev]
    frame = pd.DataFrame(cols, copy=False)
    metrics = sorted({k for r in ranges for k in r.args if "__" in k})
    for metric in metrics:
        frame[metric] = np.array([_num(r.args.get(metric)) for r in ranges], dtype="float64")
    return frame
