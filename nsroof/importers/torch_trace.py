"""torch.profiler / Kineto chrome traces (.json, .json.gz) -> the normalized kernel table.

One row per GPU activity (the correlation rules are in nsroof.importers.trace_ops and
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
  * analytic costs of the op (nsroof.models.ledger.aten): ``analytic_flops``, ``analytic_bytes``,
    ``analytic_precision``, ``analytic_tensor_dtype``, ``analytic_formula``, ``analytic_label``,
    ``analytic_missing``. A costed op launching several kernels shares its cost among them in proportion
    to their duration. The pipeline turns these into quantities in one step.

A trace without GPU activity (a CPU run) gives one row per op call (``kind`` ``cpu_op``): an op with a
known cost is a row with its whole time (its children folded in), an op without one a row with its self
time, so the rows count the profiled op time once.

Traces without kernel events but with CUPTI range-profiler counters (cat ``cuda_profiler_range``,
torch.profiler's experimental profiler_metrics) give one row per range with those counters as metric
columns and no duration: the ranges' ``dur`` is the profiling window, not the kernel time.

nsroof.profile records what the trace alone cannot say under the trace's top-level key ``nsroof``
(``prof.add_metadata_json``): the module range names, the step window, the TF32 settings. Read here, so
``nsroof analyze trace.json`` gives the report the live profile gave.
"""

from __future__ import annotations

import gzip
import json
import math
import os
import zlib
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeGuard

import numpy as np
import pandas as pd

from nsroof.errors import InputError
from nsroof.importers import trace_ops
from nsroof.importers.kernel_table import empty_identity
from nsroof.importers.trace_ops import OpTree, number
from nsroof.schema import FileFacts

KINDS: dict[str, str] = {  # cat -> kind of GPU activity row; both spellings (2021 traces capitalise)
    "kernel": "kernel", "Kernel": "kernel",
    "gpu_memcpy": "memcpy", "Memcpy": "memcpy",
    "gpu_memset": "memset", "Memset": "memset",
}
CPU_OP_CATS = ("cpu_op", "Operator")
ANNOTATION_CATS = ("user_annotation",)
LAUNCH_CATS = ("cuda_runtime", "cuda_driver", "Runtime")
RANGE_CAT = "cuda_profiler_range"
META_KEY = "nsroof"  # the top-level key nsroof.profile writes (prof.add_metadata_json)

METRIC_UNITS = {
    "gpu__time_duration.sum": "second",
    "launch__registers_per_thread": "register/thread",
    "launch__shared_mem_per_block": "byte/block",
}

# The ledger formulas whose fp32 form runs on tensor cores as TF32 when torch allows it.
TF32_MATMUL_FORMULAS = ("gemm", "gemm-bias", "bmm", "linear", "attention", "attention-backward", "decode")
TF32_CONV_PREFIX = "conv"


# --------------------------------------------------------------------------- the declared event schema
# Checked at the door, so a wrong type is one line naming the file, the event and the field rather than a
# TypeError deep in the correlation. Fields not declared here are never read.


def _is_int(v: Any) -> TypeGuard[int]:
    return isinstance(v, int) and not isinstance(v, bool)


def _is_number(v: Any) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool)


def _is_shape(v: Any) -> bool:
    """One tensor's Input Dims entry: a list of integers ([] for a scalar or a non-tensor argument)."""
    return isinstance(v, list) and all(_is_int(s) for s in v)


def _nested(v: Any, leaf: Callable[[Any], bool], depth: int) -> bool:
    """v is a list nested at most `depth` levels whose leaves pass `leaf` (iterative: never recurses)."""
    todo = [(v, depth)]
    while todo:
        x, d = todo.pop()
        if isinstance(x, list):
            if d == 0:
                return False
            todo.extend((y, d - 1) for y in x)
        elif not leaf(x):
            return False
    return True


def _scalar(v: Any) -> bool:
    return v is None or isinstance(v, str | int | float)


CHECKS: dict[str, tuple[Callable[[Any], bool], str]] = {
    "text": (lambda v: isinstance(v, str), "a string"),
    "number": (_is_number, "a number"),
    "int": (_is_int, "an integer"),
    "id": (lambda v: _is_int(v) or isinstance(v, str), "an integer or a string"),
    "object": (lambda v: isinstance(v, dict), "an object"),
    # a kernel's grid is [x, y, z]; a Triton launch op records its grid as text ("grid(100,)")
    "dim3": (lambda v: isinstance(v, str) or (isinstance(v, list) and len(v) == 3 and all(_is_number(x) for x in v)),
             "a list of 3 numbers"),
    # tensor lists give a list of shapes per input: 3 levels at most
    "shapes": (lambda v: isinstance(v, list) and all(_is_shape(x) or (isinstance(x, list) and all(map(_is_shape, x)))
                                                     for x in v),
               "a list of shapes (lists of integers) or of shape lists"),
    "values": (lambda v: isinstance(v, list) and _nested(v, _scalar, 3), "a list of values"),
}
EVENT_FIELDS: dict[str, str] = {"name": "text", "cat": "text", "ph": "text", "ts": "number", "dur": "number",
                                "pid": "id", "tid": "id", "args": "object"}
ARG_FIELDS: dict[str, str] = {
    "External id": "int", "external id": "int", "correlation": "int", "Sequence number": "int",
    "Fwd thread id": "int", "stream": "int", "device": "int", "context": "int", "grid": "dim3", "block": "dim3",
    "registers per thread": "number", "shared memory": "number", "Input Dims": "shapes", "Input type": "values",
    "Concrete Inputs": "values",
}
DEVICE_FIELDS: dict[str, str] = {"id": "int", "name": "text", "computeMajor": "int", "computeMinor": "int"}


def _check(p: Path, where: str, obj: dict[str, Any], fields: dict[str, str]) -> None:
    for key, kind in fields.items():
        if key in obj:
            ok, expected = CHECKS[kind]
            if not ok(obj[key]):
                raise InputError(p, f"{where}: field {key!r} is {_type_name(obj[key])}, expected {expected}",
                                 hint="the file is not a torch.profiler trace as written by export_chrome_trace()")


def _type_name(v: Any) -> str:
    if isinstance(v, list | dict):
        return f"a {type(v).__name__} nested too deeply or holding other types" if v else f"an empty {type(v).__name__}"
    return f"{type(v).__name__} {json.dumps(v)[:40]}"


def validate(p: Path, top: dict[str, Any], events: list[Any]) -> None:
    """The declared types of every field nsroof reads; InputError naming the event index and field."""
    devices = top.get("deviceProperties")
    if devices is not None:
        if not isinstance(devices, list):
            raise InputError(p, f"'deviceProperties' is {_type_name(devices)}, expected a list of objects")
        for k, d in enumerate(devices):
            if not isinstance(d, dict):
                raise InputError(p, f"deviceProperties[{k}] is {_type_name(d)}, expected an object")
            _check(p, f"deviceProperties[{k}]", d, DEVICE_FIELDS)
    if META_KEY in top and not isinstance(top[META_KEY], dict):
        raise InputError(p, f"top-level {META_KEY!r} is {_type_name(top[META_KEY])}, expected an object")
    for k, e in enumerate(events):
        if not isinstance(e, dict):
            raise InputError(p, f"traceEvents[{k}] is {_type_name(e)}, expected an event object")
        _check(p, f"traceEvents[{k}]", e, EVENT_FIELDS)
        args = e.get("args")
        if args:
            _check(p, f"traceEvents[{k}].args", args, ARG_FIELDS)


# --------------------------------------------------------------------------- loading


def load_events(path: str | os.PathLike[str]) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """(top-level object, traceEvents) of a chrome trace, plain or gzip, checked against the declared
    schema; InputError on anything else."""
    p = Path(path)
    try:
        with open(p, "rb") as fh:
            raw = fh.read()
        if raw[:2] == b"\x1f\x8b":
            raw = gzip.decompress(raw)
        text = raw.decode("utf-8-sig")
    except (OSError, EOFError, zlib.error) as exc:
        raise InputError(p, f"cannot read the trace ({exc or type(exc).__name__})",
                         hint="pass a torch.profiler chrome trace (.json or .json.gz); re-compress a damaged .gz") from None
    except UnicodeDecodeError as exc:
        raise InputError(p, f"not UTF-8 text ({exc.reason} at byte {exc.start})",
                         hint="pass a torch.profiler chrome trace (.json or .json.gz)") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise InputError(p, f"not valid JSON ({exc.msg})", line=exc.lineno,
                         hint="the trace may be truncated: re-export it with prof.export_chrome_trace()") from None
    except RecursionError:
        raise InputError(p, "JSON nested deeper than any chrome trace (refused, not parsed)",
                         hint="pass a torch.profiler chrome trace") from None
    if isinstance(data, list):
        top: dict[str, Any] = {}
        events: list[Any] = data
    elif isinstance(data, dict) and isinstance(data.get("traceEvents"), list):
        top, events = data, data["traceEvents"]
    else:
        raise InputError(p, "JSON without a 'traceEvents' list: not a chrome trace",
                         hint="pass a torch.profiler trace written by export_chrome_trace()")
    validate(p, top, events)
    return top, events


def _num(value: Any) -> float:
    return number(value)


def _stream(event: dict[str, Any]) -> int | None:
    args = event.get("args") or {}
    for value in (args.get("stream"), event.get("tid")):
        if _is_int(value):
            return int(value)
        if isinstance(value, str) and value.split() and value.split()[-1].isdigit():  # "stream 7"
            return int(value.split()[-1])
    return None


def _dim3(value: Any) -> str:
    if isinstance(value, list) and len(value) == 3:
        return f"({value[0]}, {value[1]}, {value[2]})"
    return ""


def _int(value: Any) -> int | None:
    return int(value) if _is_int(value) else None
# --------------------------------------------------------------------------- what nsroof.profile recorded


def trace_meta(top: dict[str, Any]) -> dict[str, Any]:
    """The facts nsroof.profile wrote under the trace's top-level 'nsroof' key ({} for other traces).
    torch writes add_metadata_json values as given: an object, or (older torch) a JSON string of one."""
    meta = top.get(META_KEY)
    if isinstance(meta, str):
        try:
            meta = json.loads(meta)
        except (ValueError, RecursionError):
            return {}
    return meta if isinstance(meta, dict) else {}


def tf32_policy(meta: dict[str, Any]) -> tuple[bool | None, bool | None]:
    """(matmul TF32 allowed, cuDNN conv TF32 allowed); None where the trace does not say."""
    tf32 = meta.get("tf32")
    if not isinstance(tf32, dict):
        return None, None
    matmul, cudnn = tf32.get("matmul"), tf32.get("cudnn")
    return (matmul if isinstance(matmul, bool) else None), (cudnn if isinstance(cudnn, bool) else None)


def step_window(meta: dict[str, Any], annotations: list[dict[str, Any]]) -> tuple[str, list[float], int, int | None]:
    """(step source, sorted boundary times µs, warmup, steps) from the step markers nsroof.profile put in
    the trace (``nsroof::step#<source>#<n>``): nsroof.step() marks when there are any, else optimizer steps."""
    marks: dict[str, list[float]] = {"nsroof": [], "optimizer": []}
    for a in annotations:
        name = str(a.get("name", ""))
        if name.startswith(trace_ops.STEP_MARKER + "#"):
            parts = name.split("#")
            marks.setdefault(parts[1] if len(parts) > 1 else "", []).append(_num(a.get("ts")))
    source = "nsroof" if marks["nsroof"] else ("optimizer" if marks["optimizer"] else "")
    window: dict[str, Any] = meta["steps"] if isinstance(meta.get("steps"), dict) else {}
    warmup, steps = window.get("warmup"), window.get("steps")
    return ((f"{source} steps" if source else ""), sorted(marks.get(source, [])), warmup if _is_int(warmup) else 0,
            steps if _is_int(steps) else None)


def in_window(start_us: float, bounds: list[float], warmup: int, steps: int | None) -> bool:
    """Whether a row started in steps [warmup, warmup + steps); step i ends at the i-th boundary."""
    index = int(np.searchsorted(np.asarray(bounds, dtype=float), start_us, side="right"))
    return warmup <= index < (math.inf if steps is None else warmup + steps)


# --------------------------------------------------------------------------- read


def read(path: str | os.PathLike[str]) -> tuple[pd.DataFrame, FileFacts]:
    top, events = load_events(path)
    name = Path(path).name
    cats: dict[str, list[dict[str, Any]]] = {}
    for e in events:
        if e.get("ph", "X") == "X":
            cats.setdefault(str(e.get("cat", "")), []).append(e)
    activities = [e for c in KINDS for e in cats.get(c, [])]
    meta = trace_meta(top)
    warnings: list[str] = []
    extra: dict[str, Any] = {}
    if not activities and cats.get(RANGE_CAT):
        frame = _profiler_ranges(cats[RANGE_CAT], top, name)
        warnings.append(f"{len(frame)} CUPTI range-profiler rows and no kernel events: counters only, no kernel "
                        "durations (a range's dur is the profiling window)")
    else:
        annotations = [e for c in ANNOTATION_CATS for e in cats.get(c, [])]
        tree = OpTree([e for c in CPU_OP_CATS for e in cats.get(c, [])], annotations,
                      [str(n) for n in meta.get("module_ranges", []) if isinstance(n, str)],
                      world_size=_world_size(top))
        if activities:
            # the kernel's name tells a TF32 matmul only where the trace does not record torch's TF32 switches
            by_name = tf32_policy(meta) == (None, None)
            frame, starts = _gpu_rows(activities, cats, tree, top, name, warnings, tf32_by_kernel_name=by_name)
            frame, extra["tf32"] = _apply_tf32(frame, meta, warnings)
        else:
            frame, starts = _cpu_rows(tree, name, meta)
            if not len(frame):
                warnings.append("no kernel events (cat 'kernel') and no CPU ops: nothing to classify")
        frame = _select_steps(frame, starts, meta, annotations, warnings, extra)
        frame["kernel_id"] = pd.array(range(len(frame)), dtype="Int64")
    units = {c: u for c, u in METRIC_UNITS.items() if c in frame.columns} | {
        c: "" for c in frame.columns if c.startswith(("smsp__", "sm__"))}
    return frame, FileFacts(format="torch-trace", source=name, metric_units=units, warnings=warnings,
                            levels=("dram",), extra=extra)


def _select_steps(frame: pd.DataFrame, starts: np.ndarray, meta: dict[str, Any], annotations: list[dict[str, Any]],
                  warnings: list[str], extra: dict[str, Any]) -> pd.DataFrame:
    source, bounds, warmup, steps = step_window(meta, annotations)
    extra["steps"] = {"source": source, "marked": len(bounds), "warmup": warmup, "steps": steps}
    if steps is None and not warmup:
        return frame
    keep = np.array([in_window(s, bounds, warmup, steps) for s in starts], dtype=bool)
    # the window the profile asked for is a fact of the file, not a warning: the summary states it
    extra["steps"] |= {"window": f"{warmup}..{warmup + (steps or 0) - 1 if steps else 'end'}",
                       "kept": int(keep.sum()), "rows": len(frame)}
    return frame[keep].reset_index(drop=True)


def _devices(top: dict[str, Any]) -> dict[int, tuple[str, str]]:
    out: dict[int, tuple[str, str]] = {}
    for d in top.get("deviceProperties") or []:
        if "id" in d:
            cc = f"{d.get('computeMajor', '')}.{d.get('computeMinor', '')}" if "computeMajor" in d else ""
            out[int(d["id"])] = (str(d.get("name", "")), cc)
    return out


def _gpu_rows(activities: list[dict[str, Any]], cats: dict[str, list[dict[str, Any]]], tree: OpTree,
              top: dict[str, Any], name: str, warnings: list[str], *,
              tf32_by_kernel_name: bool) -> tuple[pd.DataFrame, np.ndarray]:
    from nsroof.importers.names import short_name

    activities = sorted(activities, key=lambda e: (_num(e.get("ts")), _num((e.get("args") or {}).get("correlation"))))
    n = len(activities)
    launches: dict[int, dict[str, Any]] = {}
    for c in LAUNCH_CATS:
        for e in cats.get(c, []):
            corr = (e.get("args") or {}).get("correlation")
            if _is_int(corr):
                launches.setdefault(int(corr), e)
    devices = _devices(top)

    cols = empty_identity(n)
    cols["source"] = [name] * n
    dur_s = np.full(n, np.nan)
    registers = np.full(n, np.nan)
    shared = np.full(n, np.nan)
    launcher = np.full(n, -1, dtype=np.int64)
    kinds, links, op_name, shapes, modules = [""] * n, [""] * n, [""] * n, [""] * n, [""] * n
    starts = np.full(n, np.nan)
    device_ids: list[int | None] = [None] * n
    bad_dur = 0
    for i, k in enumerate(activities):
        args = k.get("args") or {}
        kinds[i] = KINDS[str(k.get("cat"))]
        dur = _num(k.get("dur"))
        if dur == dur and dur >= 0:
            dur_s[i] = dur * 1e-6  # chrome-trace dur is in µs whatever displayTimeUnit says
        else:
            bad_dur += 1
        registers[i] = _num(args.get("registers per thread"))
        shared[i] = _num(args.get("shared memory"))
        kname = str(k.get("name", ""))
        cols["kernel_name"][i] = kname
        cols["function"][i] = short_name(kname) if kinds[i] == "kernel" else kname
        cols["grid"][i] = _dim3(args.get("grid"))
        cols["block"][i] = _dim3(args.get("block"))
        dev = args.get("device", k.get("pid"))
        device_ids[i] = int(dev) if _is_int(dev) else None
        j, links[i] = tree.launcher(args, launches)
        corr = args.get("correlation")
        launch = launches.get(corr) if _is_int(corr) else None
        starts[i] = _num((launch or k).get("ts"))
        launcher[i] = j
        if j >= 0:
            op = tree.ops[j]
            op_name[i] = str(op.get("name", ""))
            dims = tree.args[j].get("Input Dims")
            shapes[i] = str(dims) if dims and any(dims) else ""
            path = tree.path(j)
            cols["nvtx_ranges"][i] = path
            cols["nvtx_path"][i] = "/".join(path)
            modules[i] = tree.module(path)
    if bad_dur:
        warnings.append(f"{bad_dur} GPU event(s) with a negative or non-finite 'dur': duration NaN")
    flagged = sum(1 for link in links if link == trace_ops.LINK_ENCLOSING)
    if flagged:
        warnings.append(f"{flagged} GPU event(s) whose launch's External id names no op enclosing the launch on its "
                        "thread: linked to the innermost enclosing op instead (op_link 'enclosing op')")
    cols["stream"] = pd.array([_stream(k) for k in activities], dtype="Int64")
    cols["context"] = pd.array([_int((k.get("args") or {}).get("context")) for k in activities], dtype="Int64")
    cols["device_id"] = pd.array(device_ids, dtype="Int64")
    cols["device"] = [devices.get(d, ("", ""))[0] if d is not None else "" for d in device_ids]
    cols["cc"] = [devices.get(d, ("", ""))[1] if d is not None else "" for d in device_ids]
    cols["process_id"] = pd.array([None] * n, dtype="Int64")
    frame = pd.DataFrame(cols)
    frame["kind"] = pd.Series(kinds, dtype=object)
    frame["op_link"] = pd.Series(links, dtype=object)
    frame["op"] = pd.Series(op_name, dtype=object)
    frame["input_shapes"] = pd.Series(shapes, dtype=object)
    frame["module"] = pd.Series(modules, dtype=object)
    frame["gpu__time_duration.sum"] = dur_s
    frame["launch__registers_per_thread"] = registers
    frame["launch__shared_mem_per_block"] = shared
    is_kernel = np.array([k == "kernel" for k in kinds], dtype=bool)
    names = cols["kernel_name"] if tf32_by_kernel_name else None
    for column, values in _analytic(tree, np.where(is_kernel, launcher, -1), dur_s, is_kernel, names).items():
        frame[column] = values
    return frame, starts


def _world_size(top: Any) -> int:
    """distributedInfo.world_size of a kineto trace (0 when absent)."""
    info = top.get("distributedInfo") if isinstance(top, dict) else None
    size = info.get("world_size") if isinstance(info, dict) else None
    return size if isinstance(size, int) and not isinstance(size, bool) and size > 0 else 0


def _analytic(tree: OpTree, launcher: np.ndarray, dur_s: np.ndarray, is_kernel: np.ndarray,
              kernel_names: Any) -> dict[str, Any]:
    from nsroof.models.ledger.aten import on_kernel

    n = len(launcher)
    unit = np.array([tree.costed_ancestor(int(j)) if j >= 0 else -1 for j in launcher], dtype=np.int64)
    unit_time: dict[int, float] = {}
    for u, d in zip(unit, dur_s, strict=True):
        if u >= 0:
            unit_time[int(u)] = unit_time.get(int(u), 0.0) + (d if d == d else 0.0)
    flops, nbytes = np.full(n, np.nan), np.full(n, np.nan)
    precision, formula, label, missing = [""] * n, [""] * n, [""] * n, [""] * n
    tensor_dtype = [""] * n
    for i in range(n):
        u, j = int(unit[i]), int(launcher[i])
        if not is_kernel[i]:
            missing[i] = "a memory copy or set, not a kernel: no roofline classification"
        elif u >= 0:
            cost = tree.cost(u) if kernel_names is None else on_kernel(tree.cost(u), str(kernel_names[i]))
            share = dur_s[i] / unit_time[u] if unit_time[u] > 0 else math.nan
            flops[i], nbytes[i] = cost.flops * share, cost.bytes * share
            precision[i], formula[i], tensor_dtype[i] = cost.precision, cost.formula, cost.tensor_dtype
            label[i] = cost.label if share == 1.0 else f"{cost.label} ×{share:.4g} (share by kernel time)"
        elif j >= 0:
            missing[i] = tree.cost(j).missing
        else:
            missing[i] = "launching op not in the trace (no runtime launch or cpu_op for the kernel's correlation)"
    return {
        "analytic_flops": flops, "analytic_bytes": nbytes,
        "analytic_precision": pd.Series(precision, dtype=object), "analytic_formula": pd.Series(formula, dtype=object),
        "analytic_label": pd.Series(label, dtype=object), "analytic_missing": pd.Series(missing, dtype=object),
        "analytic_tensor_dtype": pd.Series(tensor_dtype, dtype=object),
    }


def _apply_tf32(frame: pd.DataFrame, meta: dict[str, Any], warnings: list[str]) -> tuple[pd.DataFrame, dict[str, Any]]:
    """fp32 matmul/conv kernels on a tensor-core GPU (CC >= 8.0: TF32 exists from Ampere on) judged against
    the TF32 tensor roof when the trace says torch allowed TF32 for them; fp32 otherwise."""
    matmul, cudnn = tf32_policy(meta)
    facts: dict[str, Any] = {"matmul_allowed": matmul, "cudnn_allowed": cudnn, "rows": 0}
    if matmul is None and cudnn is None:
        facts["applied"] = "unknown: the trace does not record torch's TF32 settings; fp32 matmul/conv judged as fp32"
        return frame, facts
    formula = frame["analytic_formula"].astype(str)
    fp32 = frame["analytic_precision"].astype(str).eq("fp32")
    tensor_cores = frame["cc"].astype(str).map(_has_tf32)
    take = fp32 & tensor_cores & ((formula.isin(TF32_MATMUL_FORMULAS) & bool(matmul))
                                  | (formula.str.startswith(TF32_CONV_PREFIX) & bool(cudnn)))
    if take.any():
        frame = frame.copy()
        frame.loc[take, "analytic_precision"] = "tensor"
        frame.loc[take, "analytic_tensor_dtype"] = "tf32"
        frame.loc[take, "analytic_label"] = frame.loc[take, "analytic_label"].astype(str) + " [TF32 allowed]"
    facts["rows"] = int(take.sum())
    facts["applied"] = (f"fp32 matmul{'' if matmul else ' (not allowed)'} / conv{'' if cudnn else ' (not allowed)'} "
                        "kernels on CC >= 8.0 judged against the TF32 tensor roof where allowed")
    if take.any():
        warnings.append(f"{int(take.sum())} fp32 matmul/conv kernel(s) judged against the TF32 tensor roof: the trace "
                        f"records TF32 allowed (matmul {matmul}, cuDNN {cudnn})")
    return frame, facts


def _has_tf32(cc: str) -> bool:
    try:
        return float(cc) >= 8.0
    except ValueError:
        return False


def _cpu_rows(tree: OpTree, name: str, meta: dict[str, Any]) -> tuple[pd.DataFrame, np.ndarray]:
    rows = tree.cpu_rows()
    n = len(rows)
    cols = empty_identity(n)
    cols["source"] = [name] * n
    device = str(meta.get("cpu", "")) if isinstance(meta.get("cpu", ""), str) else ""
    paths = [tree.path(i) for i, _, _ in rows]
    for r, (i, _, _) in enumerate(rows):
        op = str(tree.ops[i].get("name", ""))
        cols["kernel_name"][r] = op
        cols["function"][r] = op
        cols["nvtx_ranges"][r] = paths[r]
        cols["nvtx_path"][r] = "/".join(paths[r])
        cols["device"][r] = device
    frame = pd.DataFrame(cols)
    frame["kind"] = pd.Series(["cpu_op"] * n, dtype=object)
    frame["op_link"] = pd.Series(["self"] * n, dtype=object)
    frame["op"] = pd.Series([str(tree.ops[i].get("name", "")) for i, _, _ in rows], dtype=object)
    frame["input_shapes"] = pd.Series(
        [str(d) if (d := tree.args[i].get("Input Dims")) and any(d) else "" for i, _, _ in rows], dtype=object)
    frame["module"] = pd.Series([tree.module(p) for p in paths], dtype=object)
    frame["duration_source"] = pd.Series([src for _, _, src in rows], dtype=object)
    frame["gpu__time_duration.sum"] = np.array([us * 1e-6 for _, us, _ in rows], dtype="float64")
    costs = [tree.cost(i) for i, _, _ in rows]
    frame["analytic_flops"] = np.array([c.flops for c in costs], dtype="float64")
    frame["analytic_bytes"] = np.array([c.bytes for c in costs], dtype="float64")
    for column, attr in (("analytic_precision", "precision"), ("analytic_formula", "formula"),
                         ("analytic_label", "label"), ("analytic_missing", "missing"),
                         ("analytic_tensor_dtype", "tensor_dtype")):
        frame[column] = pd.Series([str(getattr(c, attr)) for c in costs], dtype=object)
    starts = np.array([tree.spans[i][0] for i, _, _ in rows], dtype="float64")
    return frame, starts

def _profiler_ranges(ranges: list[dict[str, Any]], top: dict[str, Any], name: str) -> pd.DataFrame:
    from nsroof.importers.names import short_name

    ranges = sorted(ranges, key=lambda e: _num(e.get("ts")))
    n = len(ranges)
    cols = empty_identity(n)
    cols["source"] = [name] * n
    cols["kernel_id"] = pd.array(range(n), dtype="Int64")
    devices = _devices(top)
    for i, r in enumerate(ranges):
        kname = str(r.get("name", ""))
        cols["kernel_name"][i] = kname
        cols["function"][i] = short_name(kname)
        dev = r.get("pid")
        if isinstance(dev, int) and dev in devices:
            cols["device"][i], cols["cc"][i] = devices[dev]
    frame = pd.DataFrame(cols)
    metrics = sorted({k for r in ranges for k in (r.get("args") or {}) if "__" in k})
    for metric in metrics:
        frame[metric] = np.array([_num((r.get("args") or {}).get(metric)) for r in ranges], dtype="float64")
    return frame
