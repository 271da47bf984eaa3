"""Nsight Systems exports (SQLite, or a .nsys-rep through `nsys export`) -> the normalized kernel table.

The timeline becomes the events of a kineto trace (nsroof.importers.trace.events) and goes through the
trace's own reading (nsroof.importers.trace.kineto.from_events), so the correlation rules, the ops table,
the costs and the roofs are the trace's (docs/nsys.md):

  * a row per CUPTI_ACTIVITY_KIND_KERNEL / MEMCPY / MEMSET row (``kind`` kernel, memcpy, memset), and one
    per whole-graph execution (CUPTI_ACTIVITY_KIND_GRAPH_TRACE, ``--cuda-graph-trace=graph``: ``kind``
    graph, timed, never costed: the kernels inside are not recorded); node-level graph tracing gives each
    graph kernel as a kernel row with its graph and node id;
  * the launch: the CUPTI_ACTIVITY_KIND_RUNTIME call with the activity's correlationId (runtime and driver
    calls alike), on its thread (globalTid);
  * NVTX push/pop and start/end ranges (NVTX_EVENTS) on the launching thread: PyTorch's emit_nvtx ranges
    (nsroof.importers.nsys.op_text) are ops, with their sequence numbers and input sizes when recorded;
    every other range (user ranges, nsroof's, a library's domain) an annotation of the NVTX path. Ranges
    count on the thread that opened them only: an export holds every thread's ranges (a compiler's
    worker threads among them), and the launching thread's are the ones around the launch;
  * the GPU of each row from TARGET_INFO_GPU (through TARGET_INFO_CUDA_DEVICE where the export has it):
    name, compute capability; its SM count, clock and memory bandwidth are facts of the file.

Times are nanoseconds in the export and microseconds in the trace schema (float64: exact to the ns over
104 days of capture).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from nsroof.errors import InputError
from nsroof.importers.nsys import database as tables
from nsroof.importers.nsys.database import Columns
from nsroof.importers.nsys.op_text import EVALUATE, parse
from nsroof.importers.nsys.rep import REP_MAGIC, exported
from nsroof.importers.trace.events import (
    NO_OP_ARGS,
    ActivityArgs,
    Device,
    Event,
    LaunchArgs,
    OpArgs,
    Trace,
    TraceEvents,
)
from nsroof.schema import FileFacts

FORMAT = "nsys"
GRAPH_CAT = "cuda_graph"  # a whole-graph execution (kineto.KINDS: kind 'graph')
# CUPTI's enums (CUpti_ActivityMemcpyKind, CUpti_ActivityMemoryKind): the names kineto writes for copies
COPY_KINDS = {1: "HtoD", 2: "DtoH", 3: "HtoA", 4: "AtoH", 5: "AtoA", 6: "AtoD", 7: "DtoA", 8: "DtoD",
              9: "HtoH", 10: "PtoP", 11: "HtoD", 12: "DtoH", 13: "DtoD"}
MEMORY_KINDS = {0: "Pageable", 1: "Pinned", 2: "Device", 3: "Array", 4: "Managed", 5: "Device Static",
                6: "Managed Static"}
# nsys exports carry no op tree of a graph's capture that --capture could map (a kineto trace's does)
CAPTURE_HINT = ("the ops that captured a graph are not mapped in an Nsight Systems export: their kernels are "
                "timed and attributed to the NVTX ranges around the graph launch, and uncosted")
TABLES_READ = (tables.KERNEL, tables.MEMCPY, tables.MEMSET, tables.GRAPH_TRACE)


def read(path: str | os.PathLike[str]) -> tuple[pd.DataFrame, FileFacts]:
    """The kernel table and facts of an nsys SQLite export, or of a .nsys-rep exported through `nsys`."""
    p = Path(path)
    with open(p, "rb") as fh:
        head = fh.read(len(REP_MAGIC))
    if head.startswith(REP_MAGIC):
        with exported(p) as sqlite:
            return _read(sqlite, p.name)
    return _read(p, p.name)


def _read(p: Path, name: str) -> tuple[pd.DataFrame, FileFacts]:
    from nsroof.importers.trace.kineto import from_events
    from nsroof.importers.trace.load import paused_gc

    with tables.opened(p) as db, paused_gc():
        tables.check(db)
        events, facts = _events(db)
        if not events.activities:
            raise InputError(p, f"no CUDA kernels recorded ({tables.KERNEL} is empty): nothing to analyze",
                             hint="profile GPU work: `nsys profile --trace=cuda,nvtx …` (an empty capture "
                                  "range records nothing)")
    frame, file_facts = from_events(events, name, fmt=FORMAT, capture_hint=CAPTURE_HINT)
    file_facts.extra["nsys"] = facts
    return frame, file_facts


def _ints(values: Sequence[Any]) -> list[int | None]:
    """A column's integers and NULLs; a REAL or text value (an export that stored one) as its integer."""
    return [v if v is None or type(v) is int else _int(v) for v in values]


def _int(value: Any) -> int | None:
    try:
        return int(value)
    except (TypeError, ValueError, OverflowError):
        return None


def _times(cols: Columns) -> tuple[list[float], list[float]]:
    """(start, duration) in µs from the export's ns."""
    start = np.asarray(cols["start"], dtype="float64")
    return (start / 1e3).tolist(), ((np.asarray(cols["end"], dtype="float64") - start) / 1e3).tolist()


def _node(values: Sequence[Any]) -> list[int | None]:
    """graphNodeId: 0 or NULL for a kernel launched outside a graph."""
    return [v if v else None for v in _ints(values)]


def _kernels(cols: Columns) -> list[Event[ActivityArgs]]:
    if not cols or not len(cols["start"]):
        return []
    ts, dur = _times(cols)
    shared = [(a or 0) + (b or 0) for a, b in zip(cols["staticSharedMemory"], cols["dynamicSharedMemory"],
                                                  strict=True)]
    # a launch configuration is one of few: each distinct one a single list the rows share
    dims: dict[tuple[Any, ...], list[Any]] = {}
    grid = [dims.setdefault(g, list(g))
            for g in zip(cols["gridX"], cols["gridY"], cols["gridZ"], strict=True)]
    block = [dims.setdefault(b, list(b))
             for b in zip(cols["blockX"], cols["blockY"], cols["blockZ"], strict=True)]
    device, stream = _ints(cols["deviceId"]), _ints(cols["streamId"])
    args = [ActivityArgs(correlation=c, graph_id=g, graph_node_id=n, stream=s, device=d, context=x,
                         registers_per_thread=r, shared_memory=m, grid=gd, block=bd)
            for c, g, n, s, d, x, r, m, gd, bd in zip(
                _ints(cols["correlationId"]), _ints(cols["graphId"]), _node(cols["graphNodeId"]), stream,
                device, _ints(cols["contextId"]), _ints(cols["registersPerThread"]), shared, grid, block,
                strict=True)]
    names = ["" if n is None else n for n in cols["name"]]
    return [Event(n, "kernel", t, du, d, s, a)
            for n, t, du, d, s, a in zip(names, ts, dur, device, stream, args, strict=True)]


def _copy_name(table: str, row: tuple[Any, ...]) -> str:
    if table == tables.MEMSET:
        return f"Memset ({MEMORY_KINDS.get(row[0], 'Unknown')})"
    kind, src, dst = row
    return (f"Memcpy {COPY_KINDS.get(kind, 'Unknown')} "
            f"({MEMORY_KINDS.get(src, 'Unknown')} -> {MEMORY_KINDS.get(dst, 'Unknown')})")


def _copies(cols: Columns, table: str) -> list[Event[ActivityArgs]]:
    if not cols or not len(cols["start"]):
        return []
    ts, dur = _times(cols)
    keys = ["memKind"] if table == tables.MEMSET else ["copyKind", "srcKind", "dstKind"]
    names = [_copy_name(table, row) for row in zip(*(_ints(cols[k]) for k in keys), strict=True)]
    device, stream = _ints(cols["deviceId"]), _ints(cols["streamId"])
    cat = "gpu_memset" if table == tables.MEMSET else "gpu_memcpy"
    return [Event(n, cat, t, du, d, s, ActivityArgs(correlation=c, graph_id=g, graph_node_id=gn, stream=s,
                                                    device=d, context=x))
            for n, t, du, d, s, c, g, gn, x in zip(
                names, ts, dur, device, stream, _ints(cols["correlationId"]), _ints(cols["graphId"]),
                _node(cols["graphNodeId"]), _ints(cols["contextId"]), strict=True)]


def _graphs(cols: Columns) -> list[Event[ActivityArgs]]:
    if not cols or not len(cols["start"]):
        return []
    ts, dur = _times(cols)
    device, stream, graph = _ints(cols["deviceId"]), _ints(cols["streamId"]), _ints(cols["graphId"])
    return [Event(f"CUDA graph {g if g is not None else '?'} (whole-graph trace)", GRAPH_CAT, t, du, d, s,
                  ActivityArgs(correlation=c, graph_id=g, stream=s, device=d, context=x))
            for t, du, d, s, g, c, x in zip(ts, dur, device, stream, graph, _ints(cols["correlationId"]),
                                            _ints(cols["contextId"]), strict=True)]


def _thread(global_tid: int | None) -> tuple[int | None, int | None]:
    """(the Event pid, tid) of an nsys globalTid: the thread itself as the 'process' (the trace rules read a
    process's every thread for a path; nsys paths are the launching thread's), and the OS thread id (the
    low 24 bits: NVIDIA's 'Serialized process and thread identifiers')."""
    return (global_tid, global_tid & 0xFFFFFF) if global_tid is not None else (None, None)


def _launches(cols: Columns) -> list[Event[LaunchArgs]]:
    if not cols or not len(cols["start"]):
        return []
    ts, dur = _times(cols)
    gtids = _ints(cols["globalTid"])
    threads = {g: _thread(g) for g in set(gtids)}  # a few threads
    return [Event("" if n is None else n, "cuda_runtime", t, du, *threads[g], LaunchArgs(correlation=c))
            for n, t, du, g, c in zip(cols["name"], ts, dur, gtids, _ints(cols["correlationId"]),
                                      strict=True)]


def _ranges(cols: Columns) -> tuple[list[Event[OpArgs]], list[Event[OpArgs]], dict[str, int]]:
    """(ops, annotations, counts) of the NVTX ranges: emit_nvtx texts are ops, the rest annotations."""
    if not cols or not len(cols["start"]):
        return [], [], {"ops": 0, "ops_with_sizes": 0, "annotations": 0}
    ts, dur = _times(cols)
    texts = ["" if t is None else t for t in cols["text"]]
    parsed: dict[str, Any] = {text: parse(text) for text in dict.fromkeys(texts)}  # each distinct text once
    # backward functions: the nodes the engine evaluates (PyTorch 2.x) or 1.x's 'stashed seq' ranges
    nodes = {op.name.removeprefix(EVALUATE) for op in parsed.values() if op and op.name.startswith(EVALUATE)}
    events: dict[str, tuple[str, str, OpArgs]] = {
        text: ((op.name, "cpu_op", OpArgs(sequence_number=op.sequence_number, input_dims=op.input_dims,
                                          fwd_thread_id=1 if op.stashed or op.name in nodes else None))
               if op is not None else (text, "user_annotation", NO_OP_ARGS))
        for text, op in parsed.items()}
    gtids = _ints(cols["globalTid"])
    threads = {g: _thread(g) for g in set(gtids)}  # a few threads
    rows = [Event(name, cat, t, du, *threads[g], a)
            for (name, cat, a), t, du, g in zip(map(events.__getitem__, texts), ts, dur, gtids, strict=True)]
    ops = [e for e in rows if e.cat == "cpu_op"]
    annotations = [e for e in rows if e.cat != "cpu_op"]
    sized = sum(1 for e in ops if e.args.input_dims is not None)
    return ops, annotations, {"ops": len(ops), "ops_with_sizes": sized, "annotations": len(annotations)}


def _devices(db: tables.Database, device_ids: set[int]) -> tuple[list[Device], list[dict[str, Any]]]:
    """The GPUs the activities ran on (others listed beside them, an iGPU or a display adapter, are not
    read) as the trace schema's devices, and their facts."""
    devices: list[Device] = []
    facts: list[dict[str, Any]] = []
    seen: set[int] = set()
    for row in tables.gpus(db):
        cuda = _int(row["cuda_id"])
        if cuda is None or cuda not in device_ids or cuda in seen:
            continue
        seen.add(cuda)
        devices.append(Device(id=cuda, name=str(row["name"]), computeMajor=_int(row["computeMajor"]),
                              computeMinor=_int(row["computeMinor"])))
        facts.append({"device_id": cuda, "name": str(row["name"]),
                      **{key: float(row[col]) for key, col in (("sm_count", "smCount"),
                                                               ("max_sm_clock_hz", "clockRate"),
                                                               ("memory_bandwidth_bytes_per_s",
                                                                "memoryBandwidth"))
                         if row[col] is not None}})
    return devices, facts


def _events(db: tables.Database) -> tuple[TraceEvents, dict[str, Any]]:
    activities: list[Event[ActivityArgs]] = _kernels(tables.kernels(db))
    kernels = len(activities)
    for table in (tables.MEMCPY, tables.MEMSET):
        activities += _copies(tables.copies(db, table), table)
    whole = _graphs(tables.graph_launches(db))
    activities += whole
    launches = _launches(tables.launches(db, list(TABLES_READ)))
    ops, annotations, counts = _ranges(tables.nvtx_ranges(db))
    device_ids = {d for e in activities if isinstance(d := e.args.device, int)}
    devices, gpus = _devices(db, device_ids)
    missing = sorted(device_ids - {d.id for d in devices if d.id is not None})
    domains = tables.nvtx_domains(db)
    facts: dict[str, Any] = {**tables.metadata(db), "kernels": kernels, "graph_launches": len(whole),
                             "copies": len(activities) - kernels - len(whole), "nvtx": counts, "gpus": gpus,
                             "nvtx_domains": sorted(set(domains.values()))}
    if missing:
        facts["devices_not_in_target_info"] = missing
    top = Trace(deviceProperties=devices)
    return TraceEvents(top, activities, launches, ops, annotations, 0), facts


