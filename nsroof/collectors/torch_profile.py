"""``nsroof.profile()``: torch.profiler around a region, read back as a roofline report.

    with nsroof.profile(machine="h100") as prof:
        train_step()
    prof.report        # the report DataFrame, nsroof.schema.COLUMNS, level "dram"

Rows. On CPU, one row per op call that is not inside an op with a known analytic cost: an op with a cost
(e.g. ``aten::linear``) is one row whose duration is its whole CPU time, children included (so the
``aten::addmm`` inside is not counted twice); an op without one (``aten::empty``, an autograd node) is a row
with its self CPU time. The rows' durations add up to the profiled op time exactly once.
On CUDA, one row per kernel: duration = the kernel's device time; the kernel is linked to the op that
launched it through the profiler's correlation id, and the analytic cost of the outermost costed op above
it is shared among that op's kernels in proportion to their device time.

Costs are analytic (nsroof.models.ledger.aten, the ledger's formulas): flops by precision, compulsory bytes
at level dram (bytes_source ``analytic:<formula>``). An op without a formula or without recorded shapes gets
NaN and says why in ``missing``.

Steps. ``steps``/``warmup`` count step boundaries: ``nsroof.step()`` calls when the profiled code makes
any, else optimizer steps (a global optimizer post-hook). Boundaries are recorded as zero-length
``nsroof::step`` markers and the rows are filtered by start time after the run, so the choice between the
two sources can be made once the run is over.
"""

from __future__ import annotations

import json
import math
import os
import platform
import socket
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from nsroof.errors import NsroofError
from nsroof.models.machines import Machine
from nsroof.schema import PRECISIONS

SOURCE = "torch.profiler"
STEP_MARKER = "nsroof::step"


@dataclass
class OpRecord:
    """One row before it becomes a report row: what the profiler said plus the analytic cost."""

    op: str
    kernel_name: str
    input_shapes: str
    nvtx_path: str
    module: str
    start_us: float
    duration_s: float
    duration_source: str
    flops: float
    bytes: float
    precision: str
    formula: str
    label: str
    missing: str
    device: str = ""
    grid: str = ""
    block: str = ""
    stream: int | None = None
    thread: int | None = None
    tensor_dtype: str = ""  # the roof dtype of tensor-core FLOPs (precision "tensor")


@dataclass
class ProfileResult:
    report: pd.DataFrame
    kernels: pd.DataFrame
    quantities: pd.DataFrame
    machine: Machine | None
    warnings: list[str] = field(default_factory=list)
    steps_marked: int = 0
    step_source: str = ""


# --------------------------------------------------------------------------- the context manager


class profile:  # noqa: N801 - used like a function: `with nsroof.profile() as p:`
    """torch.profiler (CPU, plus CUDA when available; shapes recorded) whose exit builds the report.

    machine: a Machine, a machine name or JSON path; default: the datasheet entry of the CUDA device, or
    on CPU the measured CPU profile (nsroof.collectors.measure.cpu_profile, cached after the first run).
    steps / warmup: record `steps` steps after skipping `warmup` (see the module docstring).
    modules: open a range per nn.Module call (global module hooks) so rows carry their module.
    """

    def __init__(
        self,
        *,
        machine: Machine | str | os.PathLike[str] | None = None,
        steps: int | None = None,
        warmup: int = 0,
        cuda: bool | None = None,
        modules: bool = True,
    ) -> None:
        if steps is not None and steps < 1:
            raise NsroofError(f"steps must be >= 1, got {steps}")
        if warmup < 0:
            raise NsroofError(f"warmup must be >= 0, got {warmup}")
        self.machine_spec = machine
        self.steps = steps
        self.warmup = warmup
        self.cuda = cuda
        self.modules = modules
        self.result: ProfileResult | None = None
        self._prof: Any = None
        self._cleanup: list[Any] = []
        self._counts = {"nsroof": 0, "optimizer": 0}
        self._stopped = False

    # -- public results
    @property
    def report(self) -> pd.DataFrame:
        if self.result is None:
            raise NsroofError("the profile is not finished: read .report after the `with` block")
        return self.result.report

    def __enter__(self) -> profile:
        import torch
        from torch.profiler import ProfilerActivity
        from torch.profiler import profile as torch_profile

        from nsroof.collectors import nvtx_ranges

        use_cuda = torch.cuda.is_available() if self.cuda is None else self.cuda
        activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if use_cuda else [])
        self._use_cuda = use_cuda
        self._prof = torch_profile(activities=activities, record_shapes=True)
        self._cleanup.append(nvtx_ranges.add_step_listener(lambda n: self._boundary("nsroof")))
        from torch.optim.optimizer import register_optimizer_step_post_hook

        handle = register_optimizer_step_post_hook(
            lambda opt, args, kwargs: self._boundary("optimizer"))
        self._cleanup.append(handle.remove)
        if self.modules:
            # Forward ranges only: backward ops are attributed through autograd sequence numbers.
            self._cleanup.append(nvtx_ranges.annotate_all_modules(backward=False).remove)
        self._prof.__enter__()
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        self._stop()
        for undo in reversed(self._cleanup):
            undo()
        self._cleanup.clear()
        if exc_type is not None:
            return
        self.result = self._build()

    # -- steps
    def _boundary(self, source: str) -> None:
        if self._stopped:
            return
        self._counts[source] += 1
        from torch.autograd.profiler import record_function

        with record_function(f"{STEP_MARKER}#{source}#{self._counts[source]}"):
            pass
        if self.steps is not None:
            active = "nsroof" if self._counts["nsroof"] else "optimizer"
            if self._counts[active] >= self.warmup + self.steps:
                self._stop()

    def _stop(self) -> None:
        if not self._stopped and self._prof is not None:
            self._stopped = True
            self._prof.__exit__(None, None, None)

    # -- building the report
    def _build(self) -> ProfileResult:
        events = list(self._prof.events())
        warnings: list[str] = []
        records = records_from_events(events, cuda=self._use_cuda)
        source, starts = step_boundaries(events)
        steps_marked = len(starts)
        if self.steps is not None or self.warmup:
            records = select_steps(records, starts, self.warmup, self.steps)
            if not records:
                raise NsroofError(
                    f"no ops recorded in steps {self.warmup}..{self.warmup + (self.steps or 0) - 1}: the run marked "
                    f"{steps_marked} step(s) ({source or 'no optimizer step and no nsroof.step()'}) — lower --warmup, "
                    "or call nsroof.step() at the end of each step")
        machine = resolve_machine(self.machine_spec, cuda=self._use_cuda, warnings=warnings)
        kernels, quantities = frames_from_records(records, host=socket.gethostname(), pid=os.getpid())
        report = build_profile_report(kernels, quantities, machine)
        return ProfileResult(report, kernels, quantities, machine, warnings, steps_marked, source)


# --------------------------------------------------------------------------- events -> records


def _is_op(e: Any) -> bool:
    return not e.is_user_annotation and not getattr(e, "is_python_function", False) and not e.name.startswith(STEP_MARKER)


def _device_is_cpu(e: Any) -> bool:
    return str(e.device_type).endswith("CPU")


def _op_parent(e: Any) -> Any:
    p = e.cpu_parent
    while p is not None and not _is_op(p):
        p = p.cpu_parent
    return p


def _range_path(e: Any) -> list[str]:
    """User annotations (record_function / nsroof ranges / module ranges) enclosing `e`, outermost first,
    consecutive repeats merged (a module annotated twice)."""
    names: list[str] = []
    p = e.cpu_parent
    while p is not None:
        if p.is_user_annotation and not p.name.startswith(STEP_MARKER):
            names.append(p.name)
        p = p.cpu_parent
    names.reverse()
    return [n for i, n in enumerate(names) if i == 0 or n != names[i - 1]]


def _module_of(path: Sequence[str]) -> str:
    from nsroof.collectors.nvtx_ranges import BACKWARD_SUFFIX, MODULE_RANGE_NAMES

    for name in reversed(path):
        base = name.removesuffix(BACKWARD_SUFFIX)
        if base in MODULE_RANGE_NAMES:
            return base
    return ""


def _shapes_text(e: Any) -> str:
    shapes = getattr(e, "input_shapes", None)
    return str(list(shapes)) if shapes and any(shapes) else ""


def _cost(e: Any, memo: dict[str, Any]) -> Any:
    from nsroof.models.ledger.aten import op_cost

    dtypes, concrete = getattr(e, "input_dtypes", None), getattr(e, "concrete_inputs", None)
    # Training steps repeat the same calls: one formula evaluation per distinct (op, shapes, dtypes, args).
    key = f"{e.name}|{e.input_shapes}|{dtypes}|{concrete}"
    cost = memo.get(key)
    if cost is None:
        cost = memo[key] = op_cost(e.name, e.input_shapes, dtypes, concrete)
    return cost


EVALUATE = "autograd::engine::evaluate_function: "


class _Tree:
    """The op tree of one profile: op parents, children, costs and the forward path of backward ops."""

    def __init__(self, cpu_ops: list[Any]) -> None:
        memo: dict[str, Any] = {}
        self.costs = {id(e): _cost(e, memo) for e in cpu_ops}
        self.children: dict[int, list[Any]] = {}
        for e in cpu_ops:
            parent = _op_parent(e)
            if parent is not None:
                self.children.setdefault(id(parent), []).append(e)
        # (thread, sequence number) -> the outermost forward op carrying it, for backward attribution.
        self.forward: dict[tuple[int, int], Any] = {}
        for e in sorted(cpu_ops, key=lambda e: e.time_range.start):
            seq = getattr(e, "sequence_nr", -1)
            if seq is not None and seq >= 0 and self.backward_node(e) is None:
                self.forward.setdefault((int(e.thread), int(seq)), e)

    def costed_ancestor(self, e: Any) -> Any:
        """The outermost op at or above `e` with a known cost (None when there is none)."""
        found = None
        p = e
        while p is not None:
            if _is_op(p) and id(p) in self.costs and self.costs[id(p)].known:
                found = p
            p = p.cpu_parent
        return found

    def self_time_us(self, e: Any) -> float:
        """Total time minus the total time of its op children (annotations in between are looked through)."""
        children = self.children.get(id(e), [])
        return max(float(e.cpu_time_total) - sum(float(c.cpu_time_total) for c in children), 0.0)

    @staticmethod
    def backward_node(e: Any) -> Any:
        p = e
        while p is not None:
            if p.name.startswith(EVALUATE):
                return p
            p = p.cpu_parent
        return None

    def path(self, e: Any) -> list[str]:
        """Range path of `e`; a backward op gets the path of the forward op it differentiates, each module
        range marked ' (backward)'."""
        from nsroof.collectors.nvtx_ranges import BACKWARD_SUFFIX, MODULE_RANGE_NAMES

        own = _range_path(e)
        node = self.backward_node(e)
        if node is None:
            return own
        fwd_thread = getattr(node, "fwd_thread", None)
        key = (int(fwd_thread if fwd_thread else node.thread), int(getattr(node, "sequence_nr", -1)))
        forward = self.forward.get(key)
        if forward is None:
            return own
        fwd_path = [n + BACKWARD_SUFFIX if n in MODULE_RANGE_NAMES else n for n in _range_path(forward)]
        return own + [n for n in fwd_path if n not in own]


def records_from_events(events: Sequence[Any], *, cuda: bool) -> list[OpRecord]:
    """Rows from torch.profiler FunctionEvents (see the module docstring for the rules)."""
    cpu_ops = [e for e in events if _device_is_cpu(e) and _is_op(e)]
    tree = _Tree(cpu_ops)

    if cuda:
        kernels = [e for e in events if not _device_is_cpu(e) and not e.is_user_annotation]
        if kernels:
            return _kernel_records(kernels, cpu_ops, tree)

    records: list[OpRecord] = []
    device = cpu_name()
    for e in cpu_ops:
        unit = tree.costed_ancestor(e)
        if unit is not None and unit is not e:
            continue  # folded into the costed op above it
        cost = tree.costs[id(e)]
        path = tree.path(e)
        if cost.known:
            duration_us, duration_source = float(e.cpu_time_total), "torch.profiler:cpu_time_total"
        else:
            duration_us, duration_source = tree.self_time_us(e), "torch.profiler:cpu_time_total - op children"
        records.append(OpRecord(
            op=e.name, kernel_name=e.name, input_shapes=_shapes_text(e), nvtx_path="/".join(path),
            module=_module_of(path), start_us=float(e.time_range.start), duration_s=duration_us * 1e-6,
            duration_source=duration_source, flops=cost.flops, bytes=cost.bytes, precision=cost.precision,
            formula=cost.formula, label=cost.label, missing=cost.missing, thread=int(e.thread), device=device,
            tensor_dtype=cost.tensor_dtype,
        ))
    return records


def _kernel_records(kernels: list[Any], cpu_ops: list[Any], tree: _Tree) -> list[OpRecord]:
    costs, costed_ancestor = tree.costs, tree.costed_ancestor
    by_id = {e.id: e for e in cpu_ops}
    launcher = {id(k): by_id.get(getattr(k, "linked_correlation_id", -1)) for k in kernels}
    # Kernels under each costed op, to share its cost by device time.
    unit_of: dict[int, Any] = {}
    unit_time_us: dict[int, float] = {}
    for k in kernels:
        op = launcher[id(k)]
        unit = costed_ancestor(op) if op is not None else None
        unit_of[id(k)] = unit
        if unit is not None:
            unit_time_us[id(unit)] = unit_time_us.get(id(unit), 0.0) + float(k.time_range.elapsed_us())
    records: list[OpRecord] = []
    for k in kernels:
        op, unit = launcher[id(k)], unit_of[id(k)]
        dur_us = float(k.time_range.elapsed_us())
        meta = _kernel_metadata(k)
        if unit is not None:
            cost = costs[id(unit)]
            share = dur_us / unit_time_us[id(unit)] if unit_time_us[id(unit)] > 0 else 0.0
            flops, nbytes, precision, tensor_dtype = cost.flops * share, cost.bytes * share, cost.precision, cost.tensor_dtype
            label = cost.label if share == 1.0 else f"{cost.label} ×{share:.4g} (share of {unit.name} by kernel time)"
            formula, missing = cost.formula, ""
        else:
            reason = (costs[id(op)].missing if op is not None else
                      "no launching op (kernel without a correlated CPU op)")
            flops = nbytes = math.nan
            precision = formula = label = tensor_dtype = ""
            missing = reason
        path = tree.path(op) if op is not None else []
        records.append(OpRecord(
            op=op.name if op is not None else "", kernel_name=k.name,
            input_shapes=_shapes_text(op) if op is not None else "", nvtx_path="/".join(path), module=_module_of(path),
            start_us=float(op.time_range.start if op is not None else k.time_range.start), duration_s=dur_us * 1e-6,
            duration_source="torch.profiler:kernel device time", flops=flops, bytes=nbytes, precision=precision,
            formula=formula, label=label, missing=missing,
            device=str(meta.get("device_name", "")) or _cuda_device_name(getattr(k, "device_index", None)),
            grid=_dim3(meta.get("grid")), block=_dim3(meta.get("block")),
            stream=_int_or_none(meta.get("stream", getattr(k, "device_resource_id", None))),
            tensor_dtype=tensor_dtype,
        ))
    return records


def _cuda_device_name(index: Any) -> str:
    """The CUDA device's name ('' when torch cannot tell: no CUDA, or an index it does not know)."""
    try:
        import torch

        if isinstance(index, int) and index >= 0 and torch.cuda.is_available():
            return str(torch.cuda.get_device_name(index))
    except (ImportError, RuntimeError, AssertionError):
        pass
    return ""


def _kernel_metadata(k: Any) -> dict[str, Any]:
    raw = getattr(k, "event_metadata", None) or ""
    try:
        meta = json.loads("{" + raw + "}") if raw and not raw.lstrip().startswith("{") else json.loads(raw or "{}")
    except (TypeError, ValueError):
        return {}
    return meta if isinstance(meta, dict) else {}


def _dim3(value: Any) -> str:
    if isinstance(value, list | tuple) and len(value) == 3:
        return f"({value[0]}, {value[1]}, {value[2]})"
    return ""


def _int_or_none(value: Any) -> int | None:
    try:
        return int(value)
    except (TypeError, ValueError):
        return None


# --------------------------------------------------------------------------- steps


def step_boundaries(events: Sequence[Any]) -> tuple[str, list[float]]:
    """(source, sorted start times in µs) of the step markers: nsroof.step() marks when there are any,
    else optimizer steps."""
    marks: dict[str, list[float]] = {"nsroof": [], "optimizer": []}
    for e in events:
        if e.name.startswith(STEP_MARKER + "#"):
            source = e.name.split("#")[1]
            marks.setdefault(source, []).append(float(e.time_range.start))
    source = "nsroof" if marks["nsroof"] else ("optimizer" if marks["optimizer"] else "")
    return (f"{source} steps" if source else ""), sorted(marks.get(source, []))


def select_steps(records: list[OpRecord], starts: Sequence[float], warmup: int, steps: int | None) -> list[OpRecord]:
    """Records whose op started in steps [warmup, warmup + steps); step i ends at the i-th boundary."""
    bounds = np.asarray(starts, dtype=float)
    last = math.inf if steps is None else warmup + steps
    keep = []
    for r in records:
        index = int(np.searchsorted(bounds, r.start_us, side="right"))
        if warmup <= index < last:
            keep.append(r)
    return keep


# --------------------------------------------------------------------------- machine


def resolve_machine(spec: Machine | str | os.PathLike[str] | None, *, cuda: bool, warnings: list[str]) -> Machine | None:
    from nsroof.models import machines

    if isinstance(spec, Machine):
        return spec
    if spec is not None:
        return machines.load(os.fspath(spec))
    if cuda:
        import torch

        name = torch.cuda.get_device_name()
        found = machines.lookup_device(name)
        if found is None:
            warnings.append(f"device {name!r} is not in the machine table: pass --machine or run `nsroof measure`")
        return found
    try:
        from nsroof.collectors.measure import cpu_profile
    except ImportError:
        warnings.append("no CPU machine profile (nsroof.collectors.measure is not available): pass --machine")
        return None
    return cpu_profile()


def cpu_profile_pending() -> str:
    """Where the CPU profile will be cached when it still has to be measured ('' when it is cached or when
    the measuring module is not there)."""
    try:
        from nsroof.collectors.measure.cache import cache_key, resolve_cache_dir
    except ImportError:
        return ""
    path = resolve_cache_dir() / f"cpu-{cache_key()}.json"
    return "" if path.is_file() else str(path)


def cpu_name() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as fh:
            for line in fh:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "CPU"


# --------------------------------------------------------------------------- records -> frames -> report


def frames_from_records(records: Sequence[OpRecord], *, host: str = "", pid: int | None = None
                        ) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The kernel table (identity columns + op, input_shapes, module) and the quantities frame
    (nsroof.models.quantities contract, level dram only)."""
    n = len(records)
    kernels = pd.DataFrame({
        "source": pd.Series([SOURCE] * n, dtype=object),
        "kernel_id": pd.Series(range(n), dtype="int64"),
        "launches": pd.Series([1] * n, dtype="int64"),
        "process_id": pd.array([pid] * n, dtype="Int64"),
        "host": pd.Series([host] * n, dtype=object),
        "device": pd.Series([r.device for r in records], dtype=object),
        "cc": pd.Series([""] * n, dtype=object),
        "kernel_name": pd.Series([r.kernel_name for r in records], dtype=object),
        "function": pd.Series([r.op or r.kernel_name for r in records], dtype=object),
        "op": pd.Series([r.op for r in records], dtype=object),
        "input_shapes": pd.Series([r.input_shapes for r in records], dtype=object),
        "module": pd.Series([r.module for r in records], dtype=object),
        "grid": pd.Series([r.grid for r in records], dtype=object),
        "block": pd.Series([r.block for r in records], dtype=object),
        "stream": pd.array([r.stream for r in records], dtype="Int64"),
        "nvtx_path": pd.Series([r.nvtx_path for r in records], dtype=object),
        "nvtx_ranges": pd.Series([r.nvtx_path.split("/") if r.nvtx_path else [] for r in records], dtype=object),
    })
    q: dict[str, Any] = {
        "duration_s": np.array([r.duration_s for r in records], dtype="float64"),
        "duration_source": pd.Series([r.duration_source for r in records], dtype=object),
        "flops": np.array([r.flops for r in records], dtype="float64"),
        "flops_source": pd.Series([f"analytic:{r.label}" if r.label else "" for r in records], dtype=object),
        "flops_estimated": np.zeros(n, dtype=bool),
        "bytes_dram": np.array([r.bytes for r in records], dtype="float64"),
        "bytes_source_dram": pd.Series([f"analytic:{r.formula}" if r.formula else "" for r in records], dtype=object),
        "missing_duration": pd.Series([""] * n, dtype=object),
        "missing_flops": pd.Series([r.missing for r in records], dtype=object),
        "missing_dram": pd.Series([r.missing for r in records], dtype=object),
    }
    for p in PRECISIONS:
        # A known cost puts all its FLOPs under its precision and 0 under the others; unknown stays NaN.
        q[f"flops_{p}"] = np.array(
            [(r.flops if r.precision == p else 0.0) if r.precision else math.nan for r in records], dtype="float64")
    q["tensor_dtype"] = pd.Series([r.tensor_dtype for r in records], dtype=object)
    quantities = pd.DataFrame(q)
    quantities["ledger_label"] = pd.Series([r.label for r in records], dtype=object)
    return kernels, quantities


def build_profile_report(kernels: pd.DataFrame, quantities: pd.DataFrame, machine: Machine | None) -> pd.DataFrame:
    """Classify at level dram with the lead's report builder, then record the ledger side: the formula that
    gave each row's cost, and the ideal time / headroom against the machine's roofs."""
    from nsroof.report.build import build_report

    report = build_report(kernels, quantities, machine, levels=("dram",))
    labels = quantities["ledger_label"].reset_index(drop=True)
    report["ledger_op"] = labels.astype(object).to_numpy()
    report["expected_flops"] = report["flops"].astype("float64")
    report["min_bytes"] = report["bytes"].astype("float64")
    report["ideal_time_s"] = report["time_floor_s"].astype("float64")
    ideal = report["ideal_time_s"].to_numpy(dtype="float64")
    duration = report["duration_s"].to_numpy(dtype="float64")
    with np.errstate(divide="ignore", invalid="ignore"):
        report["headroom"] = np.where(ideal > 0, duration / ideal, np.nan)
    return report


# --------------------------------------------------------------------------- the terminal summary


def coverage(report: pd.DataFrame) -> float:
    """Share of profiled time whose row has an analytic cost."""
    d = report["duration_s"].astype("float64").fillna(0.0)
    total = d.sum()
    return float(d[report["flops"].notna()].sum() / total) if total > 0 else math.nan


def top_ops(report: pd.DataFrame, top: int = 10) -> pd.DataFrame:
    """Per op name: calls, total time, share, time-weighted bound mix and median roof fraction."""
    r = report.copy()
    r["op_key"] = r["op"].astype(str).where(r["op"].astype(str) != "", r["kernel_name"].astype(str))
    r["duration_s"] = r["duration_s"].astype("float64").fillna(0.0)
    total = r["duration_s"].sum()
    rows = []
    for op, g in r.groupby("op_key", sort=False):
        t = g["duration_s"].sum()
        by_bound = g.groupby(g["bound"].astype(str))["duration_s"].sum()
        bound = str(by_bound.idxmax()) if len(by_bound) else "unknown"
        rows.append({
            "op": op, "calls": len(g), "time_s": t, "share": t / total if total > 0 else math.nan,
            "bound": bound, "roof_fraction": float(g["roof_fraction"].astype("float64").median()),
            "flops": float(g["flops"].astype("float64").sum(min_count=1)),
            "intensity": float(np.nanmedian(g["intensity"].astype("float64"))) if g["intensity"].notna().any() else math.nan,
        })
    out = pd.DataFrame(rows, columns=["op", "calls", "time_s", "share", "bound", "roof_fraction", "flops", "intensity"])
    return out.sort_values("time_s", ascending=False).head(top).reset_index(drop=True)


def top_modules(report: pd.DataFrame, top: int = 5) -> pd.DataFrame:
    """Per innermost module: time, share, the bound carrying most of its time and the memory/compute split."""
    r = report[report["module"].astype(str) != ""]
    total = float(report["duration_s"].astype("float64").fillna(0.0).sum())
    rows = []
    for module, g in r.groupby(r["module"].astype(str), sort=False):
        d = g["duration_s"].astype("float64").fillna(0.0)
        t = float(d.sum())
        by_bound = d.groupby(g["bound"].astype(str)).sum()
        rows.append({"module": module, "time_s": t, "share": t / total if total > 0 else math.nan,
                     "bound": str(by_bound.idxmax()) if len(by_bound) else "unknown",
                     "memory": float(by_bound.get("memory", 0.0)) / t if t > 0 else math.nan,
                     "compute": float(by_bound.get("compute", 0.0)) / t if t > 0 else math.nan})
    out = pd.DataFrame(rows, columns=["module", "time_s", "share", "bound", "memory", "compute"])
    return out.sort_values("time_s", ascending=False).head(top).reset_index(drop=True)


def render_summary(result: ProfileResult | pd.DataFrame, *, top: int = 10, output: str | None = None) -> str:
    """Top ops by time with their bound, the share of time memory-/compute-bound, and the coverage."""
    from nsroof.report.summary import human_time

    report = result.report if isinstance(result, ProfileResult) else result
    if report.empty:
        return "no ops recorded"
    machine = result.machine if isinstance(result, ProfileResult) else None
    d = report["duration_s"].astype("float64").fillna(0.0)
    total = float(d.sum())
    lines = [f"{len(report)} op rows, {human_time(total)} profiled by torch.profiler on "
             f"{', '.join(sorted(set(report['device'].astype(str))))}"]
    ceilings = sorted(set(report["ceiling_source"].astype(str)))
    lines.append(f"ceilings: {', '.join(ceilings)}" + (f" ({machine.name})" if machine is not None else ""))
    if output:
        lines.append(f"report: {output}")
    lines.append("")
    lines.append(f"Top {min(top, report['op'].nunique())} ops by time (bound at DRAM against the analytic bytes)")
    lines.append(f"  {'op':<44} {'calls':>6} {'time':>9} {'share':>6}  {'bound':<8} {'roof':>5} {'FLOP/B':>8}")
    for _, row in top_ops(report, top).iterrows():
        frac = f"{row['roof_fraction']:.0%}" if np.isfinite(row["roof_fraction"]) else "-"
        inten = f"{row['intensity']:.3g}" if np.isfinite(row["intensity"]) else "-"
        name = row["op"] if len(row["op"]) <= 44 else row["op"][:43] + "…"
        lines.append(f"  {name:<44} {row['calls']:>6} {human_time(row['time_s']):>9} {row['share']:>6.1%}  "
                     f"{row['bound']:<8} {frac:>5} {inten:>8}")
    modules = top_modules(report, 5)
    if len(modules):
        lines.append("")
        lines.append("Top modules by time (forward and backward; time-weighted bound)")
        for _, row in modules.iterrows():
            name = row["module"] if len(row["module"]) <= 44 else row["module"][:43] + "…"
            lines.append(f"  {name:<44} {human_time(row['time_s']):>9} {row['share']:>6.1%}  {row['bound']:<8} "
                         f"memory {row['memory']:.0%} / compute {row['compute']:.0%}")
    lines.append("")
    shares = {b: float(d[report["bound"].astype(str) == b].sum() / total) if total > 0 else math.nan
              for b in ("memory", "compute", "unknown")}
    lines.append("Share of time: " + ", ".join(f"{b}-bound {shares[b]:.1%}" if b != "unknown" else f"unknown {shares[b]:.1%}"
                                               for b in ("memory", "compute", "unknown")))
    lines.append(f"Coverage: {coverage(report):.1%} of the time is in ops with an analytic formula")
    missing = report.loc[report["flops"].isna(), ["missing", "duration_s"]].copy()
    if len(missing):
        missing["why"] = missing["missing"].astype(str).str.split(",").str[0]
        worst = missing.groupby("why")["duration_s"].sum().sort_values(ascending=False).head(3)
        lines.append("  largest uncovered: " + "; ".join(f"{why} ({human_time(t)})" for why, t in worst.items()))
    above = report["above_roof"].astype(bool)
    if above.any():
        lines.append(f"Above a roof: {int(above.sum())} rows ({float(d[above].sum() / total):.1%} of the time) beat the "
                     "DRAM roof or the compute peak — the analytic bytes are what DRAM must at least move, so a working "
                     "set served from caches beats the DRAM roof; a compute peak measured low does the same")
    if isinstance(result, ProfileResult):
        if result.step_source:
            lines.append(f"Steps: {result.steps_marked} marked ({result.step_source})")
        lines.extend(f"warning: {w}" for w in result.warnings)
    return "\n".join(lines)
