"""torch.profiler / Kineto chrome traces (.json, .json.gz) -> the normalized kernel table.

One row per GPU kernel event (cat ``kernel``, or ``Kernel`` in 2021 Kineto traces):
  * ``gpu__time_duration.sum`` = ``dur`` (µs, fractional) × 1e-6 s, so durations flow through the same
    formula as ncu exports;
  * ``launch__registers_per_thread`` and ``launch__shared_mem_per_block`` (static + dynamic, bytes) from the
    kernel's args, grid/block as '(x, y, z)', stream, context, device (from ``deviceProperties`` when the
    trace has them; missing ``deviceProperties`` leaves device and cc empty);
  * linked to the CPU op that launched it: the kernel's ``External id`` (also spelled ``external id``) is
    the op's ``External id``; when a kernel has none, its ``correlation`` leads to the runtime launch event
    and that event's External id. Columns ``op`` and ``input_shapes`` (when the trace recorded shapes) and
    ``nvtx_path`` (the record_function / user annotations enclosing the op, outermost first);
  * analytic costs of the op (nsroof.models.ledger.aten): ``analytic_flops``, ``analytic_bytes``,
    ``analytic_precision``, ``analytic_formula``, ``analytic_label``, ``analytic_missing``. Ops without
    shapes get NaN and the reason. A costed op launching several kernels shares its cost among them in
    proportion to their duration. `apply_analytic(kernels, quantities)` puts these into a quantities frame.

Traces without kernel events but with CUPTI range-profiler counters (cat ``cuda_profiler_range``,
torch.profiler's experimental profiler_metrics) give one row per range with those counters as metric
columns and no duration: the ranges' ``dur`` is the profiling window, not the kernel time.
"""

from __future__ import annotations

import bisect
import gzip
import json
import math
import os
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from nsroof.errors import InputError
from nsroof.importers.kernel_table import empty_identity
from nsroof.schema import FileFacts

KERNEL_CATS = ("kernel", "Kernel")
CPU_OP_CATS = ("cpu_op", "Operator")
ANNOTATION_CATS = ("user_annotation",)
LAUNCH_CATS = ("cuda_runtime", "cuda_driver", "Runtime")
RANGE_CAT = "cuda_profiler_range"

METRIC_UNITS = {
    "gpu__time_duration.sum": "second",
    "launch__registers_per_thread": "register/thread",
    "launch__shared_mem_per_block": "byte/block",
}


# --------------------------------------------------------------------------- loading


def load_events(path: str | os.PathLike[str]) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """(top-level object, traceEvents) of a chrome trace, plain or gzip; InputError on anything else."""
    p = Path(path)
    try:
        with open(p, "rb") as fh:
            raw = fh.read()
        if raw[:2] == b"\x1f\x8b":
            raw = gzip.decompress(raw)
        text = raw.decode("utf-8-sig")
    except (OSError, EOFError, UnicodeDecodeError) as exc:
        raise InputError(p, f"cannot read the trace ({exc})", hint="pass a torch.profiler chrome trace (.json or .json.gz)") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise InputError(p, f"not valid JSON ({exc.msg})", line=exc.lineno,
                         hint="the trace may be truncated: re-export it with prof.export_chrome_trace()") from None
    if isinstance(data, list):
        return {}, [e for e in data if isinstance(e, dict)]
    if not isinstance(data, dict) or not isinstance(data.get("traceEvents"), list):
        raise InputError(p, "JSON without a 'traceEvents' list: not a chrome trace",
                         hint="pass a torch.profiler trace written by export_chrome_trace()")
    return data, [e for e in data["traceEvents"] if isinstance(e, dict)]


def _num(value: Any) -> float:
    try:
        return float(value)
    except (TypeError, ValueError):
        return math.nan


def _external_id(args: dict[str, Any]) -> int | None:
    for key in ("External id", "external id"):
        value = args.get(key)
        if isinstance(value, int | float) and value == value:
            return int(value)
    return None


def _stream(event: dict[str, Any]) -> int | None:
    args = event.get("args") or {}
    for value in (args.get("stream"), event.get("tid")):
        if isinstance(value, int):
            return value
        if isinstance(value, str) and value.split()[-1].isdigit():  # "stream 7"
            return int(value.split()[-1])
    return None


def _dim3(value: Any) -> str:
    if isinstance(value, list) and len(value) == 3:
        return f"({value[0]}, {value[1]}, {value[2]})"
    return ""


# --------------------------------------------------------------------------- the op tree


class _Ops:
    """CPU ops of a trace with their nesting (by time containment per process and thread) and costs."""

    def __init__(self, ops: list[dict[str, Any]], annotations: list[dict[str, Any]]) -> None:
        self.ops = ops
        self.by_external: dict[int, int] = {}
        for i, op in enumerate(ops):
            ext = _external_id(op.get("args") or {})
            if ext is not None:
                self.by_external.setdefault(ext, i)
        self.parent = self._nest(ops)
        self.annotations = self._by_thread(annotations)
        self._costs: dict[int, Any] = {}

    @staticmethod
    def _key(e: dict[str, Any]) -> tuple[str, str]:
        return str(e.get("pid")), str(e.get("tid"))

    def _nest(self, ops: list[dict[str, Any]]) -> list[int]:
        parent = [-1] * len(ops)
        order = sorted(range(len(ops)), key=lambda i: (self._key(ops[i]), _num(ops[i].get("ts")), -_num(ops[i].get("dur"))))
        stack: list[int] = []
        current: tuple[str, str] | None = None
        for i in order:
            key = self._key(ops[i])
            if key != current:
                stack, current = [], key
            start = _num(ops[i].get("ts"))
            end = start + _num(ops[i].get("dur"))
            while stack:
                top = stack[-1]
                top_end = _num(ops[top].get("ts")) + _num(ops[top].get("dur"))
                if end <= top_end:
                    break
                stack.pop()
            parent[i] = stack[-1] if stack else -1
            stack.append(i)
        return parent

    def _by_thread(self, annotations: list[dict[str, Any]]) -> dict[tuple[str, str], list[tuple[float, float, str]]]:
        out: dict[tuple[str, str], list[tuple[float, float, str]]] = {}
        for a in annotations:
            start = _num(a.get("ts"))
            out.setdefault(self._key(a), []).append((start, start + _num(a.get("dur")), str(a.get("name", ""))))
        for spans in out.values():
            spans.sort()
        return out

    def launcher(self, kernel_args: dict[str, Any], launches: dict[int, dict[str, Any]]) -> int:
        """Index of the op that launched a kernel (-1 when the trace does not hold it): the kernel's External
        id, else its runtime launch event's External id, else the innermost op enclosing that launch."""
        ext = _external_id(kernel_args)
        if ext is not None and ext in self.by_external:
            return self.by_external[ext]
        corr = kernel_args.get("correlation")
        launch = launches.get(int(corr)) if isinstance(corr, int | float) else None
        if launch is None:
            return -1
        ext = _external_id(launch.get("args") or {})
        if ext is not None and ext in self.by_external:
            return self.by_external[ext]
        return self.enclosing(launch)

    def enclosing(self, event: dict[str, Any]) -> int:
        """The innermost op on the event's thread whose span contains it (-1 when none)."""
        if not hasattr(self, "_spans"):
            self._spans: dict[tuple[str, str], list[tuple[float, float, int]]] = {}
            for i, op in enumerate(self.ops):
                s = _num(op.get("ts"))
                self._spans.setdefault(self._key(op), []).append((s, s + _num(op.get("dur")), i))
            for spans in self._spans.values():
                spans.sort()
        start = _num(event.get("ts"))
        end = start + _num(event.get("dur"))
        spans = self._spans.get(self._key(event), [])
        k = bisect.bisect_right(spans, (start, math.inf, len(self.ops)))
        while k > 0:
            k -= 1
            s, e, i = spans[k]
            if e >= end:
                return i
            if self.parent[i] < 0 and e < start:
                break  # a finished top-level op: nothing earlier can contain the event
        return -1

    def path(self, i: int) -> list[str]:
        op = self.ops[i]
        start = _num(op.get("ts"))
        end = start + _num(op.get("dur"))
        spans = self.annotations.get(self._key(op), [])
        upto = bisect.bisect_right(spans, (start, math.inf, ""))
        return [name for s, e, name in spans[:upto] if s <= start and e >= end]

    def cost(self, i: int) -> Any:
        if i not in self._costs:
            from nsroof.models.ledger.aten import op_cost

            args = self.ops[i].get("args") or {}
            self._costs[i] = op_cost(str(self.ops[i].get("name", "")), args.get("Input Dims"), args.get("Input type"),
                                     args.get("Concrete Inputs"))
        return self._costs[i]

    def costed_ancestor(self, i: int) -> int:
        """The outermost op at or above i with a known cost (-1 when none)."""
        found = -1
        j = i
        while j >= 0:
            if self.cost(j).known:
                found = j
            j = self.parent[j]
        return found


# --------------------------------------------------------------------------- read


def read(path: str | os.PathLike[str]) -> tuple[pd.DataFrame, FileFacts]:
    top, events = load_events(path)
    name = Path(path).name
    cats: dict[str, list[dict[str, Any]]] = {}
    for e in events:
        if e.get("ph", "X") == "X":
            cats.setdefault(str(e.get("cat", "")), []).append(e)
    kernels = [e for c in KERNEL_CATS for e in cats.get(c, [])]
    warnings: list[str] = []
    if not kernels and cats.get(RANGE_CAT):
        frame = _profiler_ranges(cats[RANGE_CAT], top, name)
        warnings.append(f"{len(frame)} CUPTI range-profiler rows and no kernel events: counters only, no kernel "
                        "durations (a range's dur is the profiling window)")
    else:
        frame = _kernels(kernels, cats, top, name)
        if not kernels:
            warnings.append("no kernel events (cat 'kernel'): a CPU-only trace has nothing to classify")
    units = {c: u for c, u in METRIC_UNITS.items() if c in frame.columns} | {
        c: "" for c in frame.columns if c.startswith(("smsp__", "sm__"))}
    return frame, FileFacts(format="torch-trace", source=name, metric_units=units, warnings=warnings,
                            levels=("dram",))


def _devices(top: dict[str, Any]) -> dict[int, tuple[str, str]]:
    out: dict[int, tuple[str, str]] = {}
    for d in top.get("deviceProperties") or []:
        if isinstance(d, dict) and "id" in d:
            cc = f"{d.get('computeMajor', '')}.{d.get('computeMinor', '')}" if "computeMajor" in d else ""
            out[int(d["id"])] = (str(d.get("name", "")), cc)
    return out


def _kernels(kernels: list[dict[str, Any]], cats: dict[str, list[dict[str, Any]]], top: dict[str, Any],
             name: str) -> pd.DataFrame:
    from nsroof.importers.names import short_name

    kernels = sorted(kernels, key=lambda e: (_num(e.get("ts")), _num((e.get("args") or {}).get("correlation"))))
    n = len(kernels)
    ops = _Ops([e for c in CPU_OP_CATS for e in cats.get(c, [])], [e for c in ANNOTATION_CATS for e in cats.get(c, [])])
    launches: dict[int, dict[str, Any]] = {}
    for c in LAUNCH_CATS:
        for e in cats.get(c, []):
            corr = (e.get("args") or {}).get("correlation")
            if isinstance(corr, int | float):
                launches.setdefault(int(corr), e)
    devices = _devices(top)

    cols = empty_identity(n)
    cols["source"] = [name] * n
    cols["kernel_id"] = pd.array(range(n), dtype="Int64")
    dur_s = np.empty(n)
    registers = np.full(n, np.nan)
    shared = np.full(n, np.nan)
    launcher = np.full(n, -1, dtype=np.int64)
    op_name = [""] * n
    shapes = [""] * n
    device_ids: list[int | None] = [None] * n
    for i, k in enumerate(kernels):
        args = k.get("args") or {}
        dur_s[i] = _num(k.get("dur")) * 1e-6  # chrome-trace dur is in µs whatever displayTimeUnit says
        registers[i] = _num(args.get("registers per thread"))
        shared[i] = _num(args.get("shared memory"))
        kname = str(k.get("name", ""))
        cols["kernel_name"][i] = kname
        cols["function"][i] = short_name(kname)
        cols["grid"][i] = _dim3(args.get("grid"))
        cols["block"][i] = _dim3(args.get("block"))
        dev = args.get("device", k.get("pid"))
        device_ids[i] = int(dev) if isinstance(dev, int) else None
        j = ops.launcher(args, launches)
        launcher[i] = j
        if j >= 0:
            op = ops.ops[j]
            op_name[i] = str(op.get("name", ""))
            dims = (op.get("args") or {}).get("Input Dims")
            shapes[i] = str(dims) if dims and any(dims) else ""
            path = ops.path(j)
            cols["nvtx_ranges"][i] = path
            cols["nvtx_path"][i] = "/".join(path)
    cols["stream"] = pd.array([_stream(k) for k in kernels], dtype="Int64")
    cols["context"] = pd.array([_int((k.get("args") or {}).get("context")) for k in kernels], dtype="Int64")
    cols["device_id"] = pd.array(device_ids, dtype="Int64")
    cols["device"] = [devices.get(d, ("", ""))[0] if d is not None else "" for d in device_ids]
    cols["cc"] = [devices.get(d, ("", ""))[1] if d is not None else "" for d in device_ids]
    cols["process_id"] = pd.array([None] * n, dtype="Int64")
    frame = pd.DataFrame(cols)
    frame["op"] = pd.Series(op_name, dtype=object)
    frame["input_shapes"] = pd.Series(shapes, dtype=object)
    frame["module"] = pd.Series([""] * n, dtype=object)
    frame["gpu__time_duration.sum"] = dur_s
    frame["launch__registers_per_thread"] = registers
    frame["launch__shared_mem_per_block"] = shared
    for column, values in _analytic(ops, launcher, dur_s).items():
        frame[column] = values
    return frame


def _int(value: Any) -> int | None:
    return int(value) if isinstance(value, int | float) and value == value else None


def _analytic(ops: _Ops, launcher: np.ndarray, dur_s: np.ndarray) -> dict[str, Any]:
    n = len(launcher)
    unit = np.array([ops.costed_ancestor(int(j)) if j >= 0 else -1 for j in launcher], dtype=np.int64)
    unit_time: dict[int, float] = {}
    for u, d in zip(unit, dur_s, strict=True):
        if u >= 0:
            unit_time[int(u)] = unit_time.get(int(u), 0.0) + (d if d == d else 0.0)
    flops, nbytes = np.full(n, np.nan), np.full(n, np.nan)
    precision, formula, label, missing = [""] * n, [""] * n, [""] * n, [""] * n
    tensor_dtype = [""] * n
    for i in range(n):
        u, j = int(unit[i]), int(launcher[i])
        if u >= 0:
            cost = ops.cost(u)
            share = dur_s[i] / unit_time[u] if unit_time[u] > 0 else 0.0
            flops[i], nbytes[i] = cost.flops * share, cost.bytes * share
            precision[i], formula[i], tensor_dtype[i] = cost.precision, cost.formula, cost.tensor_dtype
            label[i] = cost.label if share == 1.0 else f"{cost.label} ×{share:.4g} (share by kernel time)"
        elif j >= 0:
            missing[i] = ops.cost(j).missing
        else:
            missing[i] = "launching op not in the trace (no cpu_op with the kernel's External id or correlation)"
    return {
        "analytic_flops": flops, "analytic_bytes": nbytes,
        "analytic_precision": pd.Series(precision, dtype=object), "analytic_formula": pd.Series(formula, dtype=object),
        "analytic_label": pd.Series(label, dtype=object), "analytic_missing": pd.Series(missing, dtype=object),
        "analytic_tensor_dtype": pd.Series(tensor_dtype, dtype=object),
    }


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


# --------------------------------------------------------------------------- quantities


def apply_analytic(kernels: pd.DataFrame, quantities: pd.DataFrame) -> pd.DataFrame:
    """Fill FLOPs and DRAM bytes the counters left NaN with the analytic costs the trace importer attached
    (source ``analytic:<formula>``); rows without an analytic cost keep NaN and get its reason in missing."""
    if "analytic_flops" not in kernels.columns:
        return quantities
    q = quantities.copy()
    af = kernels["analytic_flops"].astype("float64").to_numpy()
    ab = kernels["analytic_bytes"].astype("float64").to_numpy()
    prec = kernels["analytic_precision"].astype(str).to_numpy()
    label = kernels["analytic_label"].astype(str).to_numpy()
    formula = kernels["analytic_formula"].astype(str).to_numpy()
    why = kernels["analytic_missing"].astype(str).to_numpy()
    take_f = q["flops"].isna().to_numpy() & ~np.isnan(af)
    for p in ("fp64", "fp32", "fp16", "tensor"):
        col = f"flops_{p}"
        values = q[col].astype("float64").to_numpy().copy()
        values[take_f] = np.where(prec[take_f] == p, af[take_f], 0.0)
        q[col] = values
    q.loc[take_f, "flops"] = af[take_f]
    q.loc[take_f, "flops_source"] = ["analytic:" + s for s in label[take_f]]
    q.loc[take_f, "missing_flops"] = ""
    if "analytic_tensor_dtype" in kernels.columns:
        dtypes = np.full(len(q), "", dtype=object)
        dtypes[take_f] = kernels["analytic_tensor_dtype"].astype(str).to_numpy()[take_f]
        q["tensor_dtype"] = dtypes
    take_b = q["bytes_dram"].isna().to_numpy() & ~np.isnan(ab)
    q.loc[take_b, "bytes_dram"] = ab[take_b]
    q.loc[take_b, "bytes_source_dram"] = ["analytic:" + s for s in formula[take_b]]
    q.loc[take_b, "missing_dram"] = ""
    still = q["flops"].isna().to_numpy() & (why != "")
    q.loc[still, "missing_flops"] = why[still]
    still_b = q["bytes_dram"].isna().to_numpy() & (why != "")
    q.loc[still_b, "missing_dram"] = why[still_b]
    return q

