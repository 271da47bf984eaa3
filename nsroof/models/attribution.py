"""Which formula prices which kernel: the attribution rule, written once (docs/readme/attribution.md).

The trace importer says which op launched each kernel (the kernel table's ``op_id``, the innermost
launching op) and hands over the ops table (nsroof.schema.OP_COLUMNS). Here, and only here:

1. A kernel belongs to the innermost op at or above its launching op that has a formula (its *unit*); the
   unit's cost is that formula's (nsroof.models.ledger.aten.op_cost). A composite op (matmul, linear, conv,
   attention) whose children have formulas adds nothing: its kernels already belong to the children.
2. A unit whose formula is tensor work (a GEMM, conv or attention roof) and that runs several kernels gives
   its cost to the kernels doing that work (``work``: GEMM/conv/attention kernels, told by their name or by
   the child op that launched them), never to copies, transposes, fills, layout transforms or split-K
   reductions (``aux``): those carry no share of its FLOPs (NaN, with the reason).
3. Where the work still spans several kernels, it is split by the work model, never by time: a conv
   backward's input, weight and bias gradients go to the dgrad, wgrad and reduction kernels (the formula
   evaluated per output mask); otherwise the kernels share evenly, and the label says so.
4. A cost the trace itself states for a kernel (``trace_flops``/``trace_bytes``, e.g. Inductor's) takes
   precedence over the formula, with provenance ``trace_cost_source``.

CPU traces (no kernels) have one row per op call: an op with a cost is one row with its whole time (its
children folded in), an op without one, not under a costed op, a row with its self time (a composite's, whose work is costed on
the ops it calls, says so: nsroof.models.ledger.aten.COMPOSITE_REASON).

The op-level view (`OpLevel`): one row per unit with its kernels' summed time and its formula's whole
FLOPs and bytes (for CPU traces: the innermost costed ops with their own time).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
import pandas as pd

from nsroof.models import op_evidence
from nsroof.models.analytic_fill import fill
from nsroof.models.ledger.aten import (
    COMPOSITE_REASON,
    OpCost,
    base_name,
    concrete_values,
    on_kernel,
    op_cost,
    unknown,
)
from nsroof.models.ledger.aten_data import INDEX_OPS
from nsroof.schema import (
    ANALYTIC_COLUMNS,
    ANALYTIC_QUANTITY_FIELDS,
    LINK_LEVEL,
    OP_LEVEL_KERNEL_COLUMNS,
    QUANTITY_FIELDS,
)

NOT_A_KERNEL = "a memory copy or set, not a kernel: no roofline classification"
NO_OP = "launching op not in the trace (no runtime launch or cpu_op for the kernel's correlation)"

# The ledger formulas whose fp32 form runs on tensor cores as TF32 when torch allows it.
TF32_MATMUL_FORMULAS = ("gemm", "gemm-bias", "bmm", "linear", "attention", "attention-backward", "decode")
TF32_CONV_PREFIX = "conv"

# Kernels that move or reduce data around a GEMM/conv/attention (matched on the short function name, which
# carries no template arguments): layout transforms, copies, fills, split-K reductions, im2col.
AUX_KERNEL = re.compile(r"splitk|reduce|quantize|finalize|routing|nchwtonhwc|nhwctonchw|transpose|copy|memcpy|memset|fill|elementwise|"
                        r"catarray|im2col|col2im", re.IGNORECASE)
WORK_KERNEL = re.compile(r"gemm|gemv|bmm|cublas|cutlass|xmma|wgrad|dgrad|fprop|conv|implicit|winograd|fft|flash|fmha|"
                         r"attention|attn|sdpa|mma", re.IGNORECASE)
# Child ops (without a formula of their own) that only move data, and those that do matmul/conv work.
DATA_MOVEMENT_OPS = frozenset({"copy", "contiguous", "clone", "_to_copy", "to", "fill", "zero", "transpose", "t",
                               "permute", "reshape", "view", "_unsafe_view", "cat", "expand", "as_strided",
                               "empty", "empty_strided", "zeros", "ones", "resize"})
WORK_OP = re.compile(r"mm|matmul|linear|conv|attention", re.IGNORECASE)
# conv backward kernels by the gradient they compute (cuDNN/CUTLASS names)
GRADIENT_KERNELS: tuple[tuple[int, re.Pattern[str]], ...] = (
    (0, re.compile(r"dgrad|bwd_?data|backward_?data", re.IGNORECASE)),
    (1, re.compile(r"wgrad|bwd_?filter|backward_?filter", re.IGNORECASE)),
    (2, re.compile(r"reduce", re.IGNORECASE)),
)


@dataclass
class Attribution:
    """What `attribute` returns: the kernel table (CPU traces: the op rows it keeps), its analytic table
    (ANALYTIC_COLUMNS, keyed by kernel_key), the op-level view as a kernel-like table with its own analytic
    table, and facts for the report's metadata."""

    kernels: pd.DataFrame
    analytic: pd.DataFrame
    op_kernels: pd.DataFrame
    op_analytic: pd.DataFrame
    facts: dict[str, Any] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)


class _Ops:
    """The ops table indexed by op_id, with each op's formula cost computed once."""

    def __init__(self, ops: pd.DataFrame) -> None:
        self.frame = ops
        ids = ops["op_id"].to_numpy(dtype="int64") if len(ops) else np.zeros(0, dtype="int64")
        self.row = {int(i): r for r, i in enumerate(ids)}
        parents = ops["parent_op_id"].astype("Int64").fillna(-1).to_numpy(dtype="int64") if len(ops) else ids
        self.parent = {int(i): int(p) for i, p in zip(ids, parents, strict=True)}
        self.names = ops["name"].astype(str).to_numpy() if len(ops) else np.zeros(0, dtype=object)
        # the recorded arguments as plain object arrays (a DataFrame cell lookup per op is slow)
        self.args = [ops[c].to_numpy(dtype=object) for c in ("input_shapes", "input_dtypes", "concrete_inputs")]
        self._costs: dict[int, OpCost] = {}
        self._by_call: dict[Any, OpCost] = {}
        self._units: dict[int, int] = {}
        self._contexts: Any = None
        self._children: dict[int, list[int]] | None = None  # op_id -> its direct children by start
        self.forward = ops["forward_op_id"].astype("Int64").fillna(-1).to_numpy(dtype="int64") \
            if len(ops) and "forward_op_id" in ops else np.full(len(ids), -1, dtype="int64")

    def __contains__(self, op_id: int) -> bool:
        return op_id in self.row

    def name(self, op_id: int) -> str:
        return str(self.names[self.row[op_id]])

    def cost(self, op_id: int) -> OpCost:
        found = self._costs.get(op_id)
        if found is None:
            r = self.row[op_id]
            shapes, dtypes, concrete = (a[r] for a in self.args)
            name = self.name(op_id)
            if name.startswith("aten::") and base_name(name) in INDEX_OPS:
                concrete = op_evidence.with_index_evidence(self, op_id, shapes, concrete)
            context = self.context(op_id)
            # an op without context is priced by its name and arguments alone: each step repeats the same calls
            call = (name, repr(shapes), repr(dtypes), repr(concrete)) if context is None else op_id
            found = self._by_call.get(call) or op_cost(name, shapes, dtypes, concrete, context=context)
            self._by_call[call] = found
            self._costs[op_id] = found = op_evidence.causal_math(self, op_id, found) if name == "aten::bmm" else found
        return found

    def children(self, op_id: int) -> list[int]:
        """The ops directly inside op_id, by start."""
        if self._children is None:
            self._children = op_evidence.children_by_start(self.frame, self.parent)
        return self._children.get(op_id, [])

    def context(self, op_id: int) -> Any:
        """The facts an engine op or collective needs beyond its arguments (nsroof.models.ledger.custom.OpContext):
        the step annotation on its path, its order among the same-named ops of that step (its layer), the
        process-group size and the event's attributes the importer kept (ops.attrs); None for aten ops."""
        if self.name(op_id).startswith("aten::"):
            return None
        if self._contexts is None:
            from nsroof.models.ledger.engine_facts import op_contexts

            self._contexts = op_contexts(self.frame)
        return self._contexts.get(op_id)

    def concrete(self, op_id: int) -> Any:
        return self.args[2][self.row[op_id]]

    def cost_with(self, op_id: int, concrete: list[Any]) -> OpCost:
        r = self.row[op_id]
        return op_cost(self.name(op_id), self.args[0][r], self.args[1][r], concrete)

    def _up(self, op_id: int) -> Iterator[int]:
        """op_id and the ops enclosing it, innermost first, as walked (a cycle stops after every op once)."""
        j, count = op_id, 0
        while j >= 0 and j in self.row and count <= len(self.row):
            yield j
            j, count = self.parent.get(j, -1), count + 1

    def ancestors(self, op_id: int) -> list[int]:
        """op_id and the ops enclosing it, innermost first."""
        return list(self._up(op_id))

    def unit(self, op_id: int) -> int:
        """The innermost op at or above op_id with a known cost (-1 when none); once per op."""
        found = self._units.get(op_id)
        if found is None:
            found = self._units[op_id] = next((j for j in self._up(op_id) if self.cost(j).known), -1)
        return found

    def outermost_costed(self, op_id: int) -> int:
        return next((j for j in reversed(self.ancestors(op_id)) if self.cost(j).known), -1)


_UNSET = unknown("")


@dataclass
class _Row:
    """One row of an analytic table under construction."""

    op_id: int = -1
    role: str = ""
    cost: OpCost = _UNSET  # frozen: one shared placeholder (every kernel row's cost is set or the row replaced)
    share: float = 1.0
    note: str = ""
    origin: str = "analytic"


def attribute(kernels: pd.DataFrame, ops: pd.DataFrame | None, *,
              tf32: tuple[bool | None, bool | None] = (None, None)) -> Attribution:
    """Cost every row of a trace's kernel table from the ops table (see the module docstring).
    `tf32`: whether torch allowed TF32 for (matmuls, cuDNN convs), None where the trace does not say; when
    it says nothing, a TF32 kernel name puts an fp32 matmul under the TF32 roof."""
    table = _Ops(ops if ops is not None else _no_ops())
    kernels = kernels.reset_index(drop=True)
    if len(kernels) and (kernels.get("kind", pd.Series(dtype=object)).astype(str) == "cpu_op").all():
        return _attribute_cpu(kernels, table)
    op_ids = _ints(kernels, "op_id")
    kinds = _texts(kernels, "kind", "kernel")
    # helpers are told by the short name (no template arguments, which name the GEMM a reduce serves); the
    # work, its gradient and TF32 by the full name (a CUTLASS `Kernel`'s template says tensorop_s1688gemm)
    full = _texts(kernels, "kernel_name")
    names = _texts(kernels, "function") if "function" in kernels else full
    rows = [_Row() for _ in range(len(kernels))]
    units: dict[int, list[int]] = {}
    uncosted: dict[int, list[int]] = {}  # launching ops without a cost, for the op-level view
    for i, (j, kind) in enumerate(zip(op_ids.tolist(), kinds, strict=True)):
        if kind != "kernel":
            rows[i].cost = unknown(NOT_A_KERNEL)
        elif j < 0 or j not in table:
            rows[i].cost = unknown(NO_OP)
        elif (u := table.unit(j)) < 0:
            rows[i].cost = table.cost(j)
            uncosted.setdefault(j, []).append(i)
        else:
            units.setdefault(u, []).append(i)
    policy, fp64 = _tf32_rule(tf32, _texts(kernels, "cc"), full), _fp64_tensor_rule(_texts(kernels, "cc"), full)
    for u, members in units.items():
        cost = fp64(policy(table.cost(u), members), members)
        for i, row in _split(table, u, cost, members, op_ids, (names, full)).items():
            rows[i] = row
    rows = _trace_costs(kernels, rows)
    analytic = _table(kernels, rows)
    tf32_rows = int((analytic["analytic_tensor_dtype"] == "tf32").sum()) if tf32 != (None, None) else 0
    warnings = [f"{tf32_rows} fp32 matmul/conv kernel(s) judged against the TF32 tensor roof: the trace records "
                f"TF32 allowed (matmul {tf32[0]}, cuDNN {tf32[1]})"] if tf32_rows else []
    op_kernels, op_analytic = _gpu_units(kernels, table, units | uncosted, rows)
    return Attribution(kernels, analytic, op_kernels, op_analytic, facts={"tf32_rows": tf32_rows}, warnings=warnings)


def _split(table: _Ops, u: int, cost: OpCost, members: list[int], op_ids: np.ndarray,
           kernel_names: tuple[np.ndarray, np.ndarray]) -> dict[int, _Row]:
    """The unit's cost over its kernels (rules 2 and 3); kernel_names: (short, full) names."""
    names, full = kernel_names
    if cost.roof_kind != "matmul":  # a norm, pointwise or reduction op: every kernel does its work
        return _even(u, cost, members, "own")
    aux = [i for i in members if _is_aux(table, u, int(op_ids[i]), str(names[i]))]
    if len(members) == 1 and not aux:
        return {members[0]: _Row(u, "own", cost)}
    work = [i for i in members if i not in aux]
    recognized = [i for i in work if WORK_KERNEL.search(str(full[i])) or _work_child(table, u, int(op_ids[i]))]
    if recognized:  # the other kernels beside a recognized GEMM/conv/attention kernel are helpers
        aux, work = [i for i in members if i not in recognized], recognized
    out = {i: _Row(u, "aux", unknown(f"{_aux_kind(str(names[i]))} of {table.name(u)}: its tensors are not recorded; "
                                    "the op's FLOPs and bytes are on its GEMM/conv/attention kernels"))
           for i in aux}
    parts = _gradient_parts(table, u, [*work, *aux], full)
    if parts:
        for i, (part, count, what) in parts.items():
            out[i] = _Row(u, "work", part, 1.0 / count, f"its {what} (the formula for that gradient alone)")
        return out
    out.update(_even(u, cost, work, "work"))
    return out


def _even(u: int, cost: OpCost, members: list[int], role: str) -> dict[int, _Row]:
    n = len(members)
    note = f"1 of {n} kernels of one op: the trace does not say how the work divides" if n > 1 else ""
    return {i: _Row(u, role, cost, 1.0 / n, note) for i in members}


def _is_aux(table: _Ops, u: int, j: int, name: str) -> bool:
    if j != u and base_name(table.name(j)) in DATA_MOVEMENT_OPS:
        return True
    return bool(AUX_KERNEL.search(name)) and not (j != u and WORK_OP.search(base_name(table.name(j))))


def _aux_kind(name: str) -> str:
    low = name.lower()
    if "splitk" in low or "reduce" in low:
        return "a split-K/reduction kernel"
    if "fill" in low or "memset" in low:
        return "a fill kernel"
    if AUX_KERNEL.search(name):
        return "a copy/layout kernel"
    return f"a helper kernel ({name}) beside the GEMM/conv/attention kernel"


def _work_child(table: _Ops, u: int, j: int) -> bool:
    return j != u and bool(WORK_OP.search(base_name(table.name(j))))


def _gradient_parts(table: _Ops, u: int, members: list[int], names: np.ndarray
                    ) -> dict[int, tuple[OpCost, int, str]]:
    """convolution_backward: each gradient's cost (the formula with an output mask of that gradient alone)
    for the kernels computing it; {} unless every kernel's gradient is told by its name."""
    if base_name(table.name(u)) != "convolution_backward":
        return {}
    concrete = concrete_values(table.concrete(u))
    if len(concrete) < 11 or not isinstance(concrete[10], list | tuple) or len(concrete[10]) != 3:
        return {}
    mask = [bool(m) for m in concrete[10]]
    which = {i: next((g for g, rx in GRADIENT_KERNELS if rx.search(str(names[i]))), -1) for i in members}
    if any(g < 0 or not mask[g] for g in which.values()) or {g for g in range(3) if mask[g]} != set(which.values()):
        return {}
    out: dict[int, tuple[OpCost, int, str]] = {}
    for g, what in enumerate(("input gradient", "weight gradient", "bias gradient")):
        kernels = [i for i, w in which.items() if w == g]
        if kernels:
            part = table.cost_with(u, [*concrete[:10], [k == g for k in range(3)], *concrete[11:]])
            if not part.known:
                return {}
            out.update({i: (part, len(kernels), what) for i in kernels})
    return out


def _tf32_rule(tf32: tuple[bool | None, bool | None], cc: np.ndarray, names: np.ndarray
               ) -> Callable[[OpCost, list[int]], OpCost]:
    """How a unit's fp32 matmul/conv cost meets TF32: by torch's recorded switches on CC >= 8.0 GPUs, or by
    its kernels' names when the trace records no switch."""
    matmul, cudnn = tf32

    def rule(cost: OpCost, members: list[int]) -> OpCost:
        if tf32 == (None, None):
            for i in members:
                cost = on_kernel(cost, str(names[i]))
            return cost
        allowed = ((cost.formula in TF32_MATMUL_FORMULAS and bool(matmul))
                   or (cost.formula.startswith(TF32_CONV_PREFIX) and bool(cudnn)))
        if cost.known and cost.precision == "fp32" and allowed and any(_has_tf32(str(cc[i])) for i in members):
            return replace(cost, precision="tensor", tensor_dtype="tf32", label=f"{cost.label} [TF32 allowed]")
        return cost

    return rule


# FP64 tensor cores (DMMA) exist on the data-center parts only: CC 8.0 (A100, A30), 9.0 (H100, H200, GH200),
# 10.0 (B200, GB200); cuBLAS runs FP64 GEMMs on them there (NVIDIA A100 and H100 datasheets: "FP64 Tensor
# Core" 19.5 / 67 TFLOP/s against 9.7 / 34 on CUDA cores). Consumer and embedded parts (8.6, 8.7, 8.9, 12.x)
# have none; a CUTLASS SIMT kernel says so in its name.
FP64_TENSOR_CC = frozenset({"8.0", "9.0", "10.0"})
FP64_SIMT_KERNEL = re.compile(r"simt", re.IGNORECASE)


def _fp64_tensor_rule(cc: np.ndarray, names: np.ndarray) -> Callable[[OpCost, list[int]], OpCost]:
    """An fp64 matmul-family cost on a device with FP64 tensor cores meets the FP64 tensor roof (the dense
    fp64 peak), picked like TF32: by the op's dtype and formula, the device, and the kernel (a SIMT kernel
    stays on the CUDA-core fp64 roof)."""
    def rule(cost: OpCost, members: list[int]) -> OpCost:
        if (cost.known and cost.precision == "fp64" and cost.formula in TF32_MATMUL_FORMULAS
                and any(str(cc[i]) in FP64_TENSOR_CC for i in members)
                and not any(FP64_SIMT_KERNEL.search(str(names[i])) for i in members)):
            return replace(cost, precision="tensor", tensor_dtype="fp64", label=f"{cost.label} [FP64 tensor cores]")
        return cost

    return rule


def _has_tf32(cc: str) -> bool:
    try:
        return float(cc) >= 8.0
    except ValueError:
        return False


def _trace_costs(kernels: pd.DataFrame, rows: list[_Row]) -> list[_Row]:
    """Rule 4: a cost the trace states for a kernel replaces the formula's (the hook for Inductor's
    kernel_flop / kernel_num_gb)."""
    if "trace_flops" not in kernels:
        return rows
    flops = kernels["trace_flops"].astype("float64").to_numpy()
    nbytes = (kernels["trace_bytes"] if "trace_bytes" in kernels else pd.Series(np.nan, index=kernels.index)
              ).astype("float64").to_numpy()
    origin = _texts(kernels, "trace_cost_source")
    for i in np.flatnonzero(~np.isnan(flops) | ~np.isnan(nbytes)).tolist():
        old = rows[i].cost
        source = str(origin[i]) or "trace"
        prefix, _, label = source.partition(":")
        rows[i] = _Row(rows[i].op_id, rows[i].role or "own",
                       OpCost(flops[i], nbytes[i], label or prefix, label or prefix, old.precision or "fp32", "",
                              # the trace's bytes are DRAM bytes, whatever roof the formula's had
                              old.tensor_dtype, "" if old.roof_kind == LINK_LEVEL else old.roof_kind), 1.0, "", prefix)
    return rows


def _table(kernels: pd.DataFrame, rows: list[_Row]) -> pd.DataFrame:
    """The analytic table (ANALYTIC_COLUMNS) of `rows`, keyed like `kernels`."""
    def label(r: _Row) -> str:
        if not r.cost.known:
            return ""
        return r.cost.label + (f" ×{r.share:.4g} ({r.note})" if r.share != 1.0 or r.note else "")

    columns: dict[str, Any] = {
        "source": _texts(kernels, "source"),
        "kernel_id": pd.array(kernels["kernel_id"], dtype="Int64") if "kernel_id" in kernels
        else pd.array(range(len(kernels)), dtype="Int64"),
        "analytic_op_id": pd.array([r.op_id if r.op_id >= 0 else None for r in rows], dtype="Int64"),
        "analytic_role": [r.role for r in rows],
        "analytic_flops": np.array([r.cost.flops * r.share for r in rows], dtype="float64"),
        "analytic_bytes": np.array([r.cost.bytes * r.share for r in rows], dtype="float64"),
        "analytic_precision": [r.cost.precision for r in rows],
        "analytic_tensor_dtype": [r.cost.tensor_dtype for r in rows],
        "analytic_formula": [r.cost.formula for r in rows],
        "analytic_label": [label(r) for r in rows],
        "analytic_missing": [r.cost.missing for r in rows],
        "analytic_origin": [r.origin if r.cost.known else "" for r in rows],
        "analytic_roof": [LINK_LEVEL if r.cost.known and r.cost.roof_kind == LINK_LEVEL else "" for r in rows],
    }
    out = pd.DataFrame({c: (pd.Series(v, dtype=object) if isinstance(v, list | np.ndarray) and
                            ANALYTIC_COLUMNS[c][0] == "object" else v) for c, v in columns.items()})
    return out[list(ANALYTIC_COLUMNS)]


# --------------------------------------------------------------------------- CPU traces and the op-level view


def _attribute_cpu(kernels: pd.DataFrame, table: _Ops) -> Attribution:
    """One row per op call in, the rows that count the op time once out: an op with a cost whole, an op
    without one (not under a costed op) with its self time."""
    op_ids = _ints(kernels, "op_id").tolist()
    keep, self_us = [], []
    children: dict[int, float] = {}
    durations = table.frame["duration_us"].to_numpy(dtype="float64") if len(table.frame) else np.zeros(0)
    for j, p in table.parent.items():
        if p >= 0:
            children[p] = children.get(p, 0.0) + float(durations[table.row[j]])
    for r, j in enumerate(op_ids):
        unit = table.outermost_costed(j) if j in table else -1
        if unit >= 0 and unit != j:
            continue
        keep.append(r)
        self_us.append(np.nan if unit == j else max(float(durations[table.row[j]]) - children.get(j, 0.0), 0.0))
    out = kernels.iloc[keep].reset_index(drop=True)
    own = np.array(self_us, dtype="float64")
    if len(out):
        seconds = out["gpu__time_duration.sum"].astype("float64").to_numpy()
        out["gpu__time_duration.sum"] = np.where(np.isnan(own), seconds, own * 1e-6)
        out["duration_source"] = pd.Series(np.where(np.isnan(own), "cpu_op dur", "cpu_op dur - op children dur"),
                                           dtype=object)
    out["kernel_id"] = pd.array(range(len(out)), dtype="Int64")
    calls_costed = {a for k in table.row if table.cost(k).known for a in table.ancestors(k)[1:]}
    rows = [_Row(j, "own", table.cost(j)) if table.cost(j).known
            else _Row(cost=unknown(COMPOSITE_REASON) if j in calls_costed else table.cost(j))
            for j in _ints(out, "op_id").tolist()]
    analytic = _table(out, rows)
    seen = set(_ints(kernels, "op_id").tolist())  # the ops of the selected steps
    units = [j for j in _cpu_units(table) if j in seen]
    own_us = table.frame.set_index("op_id")["duration_us"] if len(table.frame) else pd.Series(dtype="float64")
    op_kernels, op_analytic = _units_table(out, table, {j: (table.cost(j), float(own_us[j]) * 1e-6, "cpu_op dur")
                                                        for j in units}, {})
    return Attribution(out, analytic, op_kernels, op_analytic)


def _cpu_units(table: _Ops) -> list[int]:
    """The ops of a CPU trace that carry their own cost (rule 1 without kernels): an op with a formula, unless
    an op inside it has a formula for the same kind of work (tensor work under a matmul/conv/attention op,
    any formula under another op): then it is a composite and adds nothing (aten::linear under which
    aten::addmm runs; aten::addmm's own copy of the bias is no such cover)."""
    any_below: set[int] = set()
    tensor_below: set[int] = set()
    for k in table.row:
        if table.cost(k).known:
            above = table.ancestors(k)[1:]
            any_below.update(above)
            if table.cost(k).roof_kind == "matmul":
                tensor_below.update(above)
    return [j for j in table.row if table.cost(j).known
            and j not in (tensor_below if table.cost(j).roof_kind == "matmul" else any_below)]


def _gpu_units(kernels: pd.DataFrame, table: _Ops, units: dict[int, list[int]], rows: list[_Row]
               ) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The op-level rows of a GPU trace: per unit, its kernels' summed time and its (TF32-judged) cost."""
    seconds = kernels["gpu__time_duration.sum"].astype("float64").to_numpy() if len(kernels) else np.zeros(0)
    picked: dict[int, tuple[OpCost, float, str]] = {}
    for u, members in units.items():
        costs = [rows[i].cost for i in members if rows[i].role not in ("aux", "") and rows[i].cost.known]
        cost = table.cost(u)
        if costs and costs[0].precision != cost.precision:  # the TF32 judgement its kernels got
            cost = replace(cost, precision=costs[0].precision, tensor_dtype=costs[0].tensor_dtype,
                           label=costs[0].label if costs[0].formula == cost.formula else cost.label)
        if all(rows[i].role == "aux" for i in members):  # its helpers alone: the sample lost the work kernel
            picked[u] = (cost, np.nan, f"its GEMM/conv/attention kernel is not in the trace (its {len(members)} "
                                       f"helper kernel(s) ran {seconds[members].sum() * 1e6:.3g} us)")
        else:
            picked[u] = (cost, float(seconds[members].sum()), "sum of its kernels' gpu__time_duration.sum")
    return _units_table(kernels, table, picked, units)


def _units_table(kernels: pd.DataFrame, table: _Ops, units: dict[int, tuple[OpCost, float, str]],
                 members: dict[int, list[int]]) -> tuple[pd.DataFrame, pd.DataFrame]:
    """A kernel-like table (kind 'op', kernel_id = op_id, launches = its kernels; declared in
    nsroof.schema.OP_LEVEL_KERNEL_COLUMNS) and its analytic table: the op-level view goes through the same
    quantities and classification as the kernel rows."""
    ids = sorted(units)
    first = [members[u][0] if members.get(u) else -1 for u in ids]
    source = str(_texts(kernels, "source")[0]) if len(kernels) else ""

    def of_kernel(name: str) -> list[str]:
        values = _texts(kernels, name)
        return [str(values[i]) if i >= 0 else (str(values[0]) if len(values) else "") for i in first]

    at = [table.row[u] for u in ids]  # a column read whole, then indexed (a DataFrame cell lookup per op is slow)
    of_op = {c: table.frame[c].to_numpy(dtype=object)[at].tolist() for c in ("input_shapes", "module", "nvtx_path")}

    names = [table.name(u) for u in ids]
    op_kernels = pd.DataFrame({
        "source": pd.Series([source] * len(ids), dtype=object),
        "kernel_id": pd.array(ids, dtype="Int64"),
        "kind": pd.Series(["op"] * len(ids), dtype=object),
        "kernel_name": pd.Series(names, dtype=object),
        "function": pd.Series(names, dtype=object),
        "op": pd.Series(names, dtype=object),
        "op_id": pd.array(ids, dtype="Int64"),
        "input_shapes": pd.Series([_shape_text(v) for v in of_op["input_shapes"]], dtype=object),
        "module": pd.Series([str(v) for v in of_op["module"]], dtype=object),
        "nvtx_path": pd.Series([str(v) for v in of_op["nvtx_path"]], dtype=object),
        "device": pd.Series(of_kernel("device"), dtype=object),
        "cc": pd.Series(of_kernel("cc"), dtype=object),
        "launches": pd.array([len(members.get(u, [])) or 1 for u in ids], dtype="Int64"),
        "gpu__time_duration.sum": np.array([units[u][1] for u in ids], dtype="float64"),
        "duration_source": pd.Series([units[u][2] for u in ids], dtype=object),
    })
    analytic = _table(op_kernels, [_Row(u, "own", units[u][0]) for u in ids])
    return op_kernels, analytic


def _shape_text(dims: Any) -> str:
    """The kernel table's input_shapes text of a recorded Input Dims list."""
    return str(dims) if isinstance(dims, list) and dims and any(dims) else ""


def _no_ops() -> pd.DataFrame:
    from nsroof.schema import OP_COLUMNS

    return pd.DataFrame({c: pd.Series([], dtype=d) for c, (d, _, _) in OP_COLUMNS.items()})


def _ints(frame: pd.DataFrame, name: str) -> np.ndarray:
    if name not in frame:
        return np.full(len(frame), -1, dtype="int64")
    return frame[name].astype("Int64").fillna(-1).to_numpy(dtype="int64")


def _texts(frame: pd.DataFrame, name: str, default: str = "") -> np.ndarray:
    if name not in frame:
        return np.full(len(frame), default, dtype=object)
    values = frame[name].astype(object).where(frame[name].notna(), "").astype(str).to_numpy(dtype=object)
    return np.where(values == "", default, values) if default else values


# --------------------------------------------------------------------------- the one way to fill analytic costs


@dataclass
class Costed:
    """A file's kernel table and its quantities with the analytic costs in, and the same for its op-level
    view (empty for formats without ops): what nsroof.report.build classifies."""

    kernels: pd.DataFrame
    quantities: pd.DataFrame
    op_kernels: pd.DataFrame
    op_quantities: pd.DataFrame
    facts: dict[str, Any] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)


def costed(kernels: pd.DataFrame, ops: pd.DataFrame | None, *,
           tf32: tuple[bool | None, bool | None] = (None, None)) -> Costed:
    """derive(kernels) with the analytic costs of `attribute` filled in (a table without ops: derive alone)."""
    from nsroof.models.quantities import derive

    if ops is None and "op_id" not in kernels.columns:
        none = pd.DataFrame({c: [] for c in OP_LEVEL_KERNEL_COLUMNS})
        quantities = pd.DataFrame({f.name: [] for f in (*QUANTITY_FIELDS, *ANALYTIC_QUANTITY_FIELDS)})
        return Costed(kernels, derive(kernels), none, quantities)
    a = attribute(kernels, ops, tf32=tf32)
    return Costed(a.kernels, fill(a.kernels, derive(a.kernels), a.analytic), a.op_kernels,
                  fill(a.op_kernels, derive(a.op_kernels), a.op_analytic), a.facts, a.warnings)
