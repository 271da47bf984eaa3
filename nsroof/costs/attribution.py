"""Which formula prices which kernel: the attribution rule, written once (docs/readme/attribution.md).

The trace importer says which op launched each kernel (the kernel table's ``op_id``, the innermost
launching op) and hands over the ops table (nsroof.schema.OP_COLUMNS). Here, and only here:

1. A kernel belongs to the innermost op at or above its launching op that has a formula (its *unit*); the
   unit's cost is that formula's (nsroof.costs.ledger.aten.op_cost). A composite op (matmul, linear, conv,
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
children folded in), an op without one, not under a costed op, a row with its self time (a composite's,
whose work is costed on the ops it calls, says so: nsroof.costs.ledger.aten.COMPOSITE_REASON). An op that
autocast re-dispatched at another dtype (OpTable.redispatched: aten::linear on fp32 inputs calling
aten::to casts, then aten::linear on their bf16 copies) is no such op: the call inside it is, at the dtype
it ran in, and so is each cast; the outer call keeps its self time (REDISPATCH_REASON).

The op-level view (`OpLevel`): one row per unit with its kernels' summed time and its formula's whole
FLOPs and bytes (for CPU traces: the innermost costed ops with their own time).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
import pandas as pd

from nsroof.costs.analytic_rows import Distinct, Row, Rows, analytic_table, ints, objects, per_cost
from nsroof.costs.ledger.aten import (
    COMPILED_WRAPPER,
    COMPOSITE_REASON,
    DTYPE_UNRECORDED,
    OpCost,
    base_name,
    concrete_values,
    unknown,
)
from nsroof.costs.op_table import OpTable
from nsroof.costs.precision_rules import TF32_CONV_PREFIX, TF32_MATMUL_FORMULAS, fp64_tensor_rule, tf32_rule
from nsroof.frames.columns import texts
from nsroof.frames.distinct import row_codes
from nsroof.names.kernel_dtypes import kernel_dtype
from nsroof.schema import LINK_LEVEL

NOT_A_KERNEL = "a memory copy or set, not a kernel: no roofline classification"
# a row of Nsight Systems' whole-graph trace (kind 'graph'): one CUDA graph launch, its kernels unrecorded
WHOLE_GRAPH = ("a whole CUDA graph's execution (nsys --cuda-graph-trace=graph records no kernel inside it): "
               "profile with --cuda-graph-trace=node for a row per kernel")
NO_OP = "launching op not in the trace (no runtime launch or cpu_op for the kernel's correlation)"
KERNEL_DTYPE = "dtype from kernel name"  # the label of an op priced at the dtype its kernels' names state
REDISPATCH_REASON = ("autocast's own time around an op it re-dispatched at another dtype: the work is costed "
                     "on the call inside it, at the dtype it ran in, and each cast on its own row")

# Kernels that move or reduce data around a GEMM/conv/attention (matched on the short function name, which
# carries no template arguments): layout transforms, copies, fills, split-K reductions, im2col, and a fused
# MoE's routing (top-k, the expert bitmatrix, its sort: triton_kernels' _topk_forward, _sum_bitmatrix_rows).
AUX_KERNEL = re.compile(r"splitk|reduce|quantize|finalize|routing|topk|bitmatrix|sort|nchwtonhwc|"
                        r"nhwctonchw|transpose|copy|memcpy|memset|fill|elementwise|catarray|im2col|col2im",
                        re.IGNORECASE)
WORK_KERNEL = re.compile(r"gemm|gemv|bmm|cublas|cutlass|xmma|wgrad|dgrad|fprop|conv|implicit|winograd|fft|"
                         r"flash|fmha|attention|attn|sdpa|mma", re.IGNORECASE)
# Child ops (without a formula of their own) that only move data, and those that do matmul/conv work.
DATA_MOVEMENT_OPS = frozenset({"copy", "contiguous", "clone", "_to_copy", "to", "fill", "zero", "transpose",
                               "t", "permute", "reshape", "view", "_unsafe_view", "cat", "expand",
                               "as_strided", "empty", "empty_strided", "zeros", "ones", "resize"})
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


@dataclass
class _Groups:
    """Kernels grouped by an op (a unit, or a launching op without a cost): the groups by op_id, each one's
    kernels in table order (members[start[g]:start[g] + size[g]])."""

    ids: np.ndarray
    start: np.ndarray
    size: np.ndarray
    members: np.ndarray
    costed: np.ndarray  # whether the op is a unit

    @classmethod
    def of(cls, kernels: np.ndarray, ops: np.ndarray, costed: np.ndarray) -> _Groups:
        order = np.argsort(ops, kind="stable")
        by_op = ops[order]
        start = (np.flatnonzero(np.r_[True, by_op[1:] != by_op[:-1]]) if len(by_op)
                 else np.zeros(0, dtype="int64"))
        size = np.diff(np.r_[start, len(by_op)])
        return cls(by_op[start], start, size, kernels[order], costed[order][start])

    def of_member(self) -> np.ndarray:
        """The group of each member."""
        return np.repeat(np.arange(len(self.ids)), self.size)

    def kernels(self, g: int) -> list[int]:
        return self.members[self.start[g]:self.start[g] + self.size[g]].tolist()


def _wrappers(names: np.ndarray) -> np.ndarray:
    """Which op names are torch.compile's wrappers (nsroof.costs.ledger.aten.COMPILED_WRAPPER)."""
    if not len(names):
        return np.zeros(0, dtype=bool)
    return pd.Series(names, dtype=object).astype(str).str.fullmatch(COMPILED_WRAPPER.pattern).to_numpy(
        dtype=bool)


def attribute(kernels: pd.DataFrame, ops: pd.DataFrame | None, *,
              tf32: tuple[bool | None, bool | None] = (None, None)) -> Attribution:
    """Cost every row of a trace's kernel table from the ops table (see the module docstring).
    `tf32`: whether torch allowed TF32 for (matmuls, cuDNN convs), None where the trace does not say; when
    it says nothing, a TF32 kernel name puts an fp32 matmul under the TF32 roof."""
    table = OpTable(ops if ops is not None else _no_ops())
    kernels = kernels.reset_index(drop=True)
    kinds = texts(kernels, "kind")
    # (a table without kinds: CPU rows)
    if len(kernels) and ("kind" not in kernels or (kinds == "cpu_op").all()):
        return _attribute_cpu(kernels, table)
    op_ids = ints(kernels, "op_id")
    kinds = np.where(kinds == "", "kernel", kinds)
    # helpers are told by the short name (no template arguments, which name the GEMM a reduce serves); the
    # work, its gradient, TF32 and a dtype by the full name (a CUTLASS `Kernel`'s template: s1688gemm)
    full = texts(kernels, "kernel_name")
    names = texts(kernels, "function") if "function" in kernels else full
    rows = Rows(len(kernels))
    is_kernel = kinds == "kernel"
    at = np.where(is_kernel & (op_ids >= 0), table.rows_of(op_ids), -1)
    table.set_launches(np.where(at >= 0, op_ids, -1), texts(kernels, "nvtx_path"), full)
    rows.cost[~is_kernel] = unknown(NOT_A_KERNEL)
    rows.cost[kinds == "graph"] = unknown(WHOLE_GRAPH)
    rows.cost[is_kernel & (at < 0)] = unknown(NO_OP)
    launched = np.flatnonzero(at >= 0)
    unit = table.units_at(at[launched])
    lone = launched[unit < 0]  # launching ops without a cost, kept for the op-level view
    rows.cost[lone] = table.costs_at(at[lone])
    groups = _Groups.of(launched, np.where(unit < 0, op_ids[launched], unit), unit >= 0)
    _kernel_dtypes(table, groups, full)
    cc = texts(kernels, "cc")
    plain = _plain_units(table, groups, rows)
    _tensor_units(table, groups, np.flatnonzero(groups.costed & ~plain), rows, (op_ids, names, full, cc),
                  tf32)
    _trace_costs(kernels, rows)
    analytic = analytic_table(kernels, rows)
    tf32_rows = int((analytic["analytic_tensor_dtype"] == "tf32").sum()) if tf32 != (None, None) else 0
    warnings = [f"{tf32_rows} fp32 matmul/conv kernel(s) judged against the TF32 tensor roof: the trace "
                f"records TF32 allowed (matmul {tf32[0]}, cuDNN {tf32[1]})"] if tf32_rows else []
    op_kernels, op_analytic = _gpu_units(kernels, table, groups, rows)
    warnings += table.warnings()
    return Attribution(kernels, analytic, op_kernels, op_analytic, facts={"tf32_rows": tf32_rows},
                       warnings=warnings)


def _kernel_dtypes(table: OpTable, groups: _Groups, full: np.ndarray) -> None:
    """Each unit recorded without dtypes (its FLOPs from the shapes, DTYPE_UNRECORDED) priced at the dtype its
    kernels' full names state (nsroof.names.kernel_dtypes: cuBLAS, cuDNN, CUTLASS), where they state one and
    no other: then its bytes and its compute roof are known too."""
    costed = np.flatnonzero(groups.costed)
    lacking = costed[per_cost(table.costs_at(table.rows_of(groups.ids[costed])),
                              lambda c: c.missing == DTYPE_UNRECORDED, bool)] if len(costed) else costed
    if not len(lacking):
        return
    codes, first = row_codes(full)
    stated = objects([kernel_dtype(str(name)) for name in full[first].tolist()])[codes]
    # per group, the dtypes its kernels state (a code each; -1: none stated): one unit's, when the lowest
    # and the highest stated are the same
    dtype_code, dtype_names = pd.factorize(pd.Series(stated[groups.members], dtype=object))
    stating = dtype_code >= 0
    group = groups.of_member()
    low = np.full(len(groups.ids), np.iinfo(np.int64).max, dtype=np.int64)
    high = np.full(len(groups.ids), -1, dtype=np.int64)
    np.minimum.at(low, group[stating], dtype_code[stating])
    np.maximum.at(high, group[stating], dtype_code[stating])
    one = lacking[low[lacking] == high[lacking]]
    dtypes = [str(d) for d in np.asarray(dtype_names, dtype=object)[high[one]].tolist()]
    table.price_at_dtypes(groups.ids[one].astype("int64"), dtypes, KERNEL_DTYPE)


def _plain_units(table: OpTable, groups: _Groups, rows: Rows) -> np.ndarray:
    """Rule 3 for the units no TF32/FP64 judgement and no tensor-work split touches (a norm, pointwise or
    reduction formula: every kernel does its work, the cost shared evenly), put in all at once; which groups
    those are."""
    cost = table.costs_at(table.rows_of(groups.ids))
    plain = groups.costed & per_cost(cost, lambda c: c.roof_kind != "matmul" and c.formula not in
                                      TF32_MATMUL_FORMULAS and not c.formula.startswith(TF32_CONV_PREFIX),
                                      bool)
    g = groups.of_member()
    at = plain[g]
    kernels, n = groups.members[at], groups.size[g][at]
    rows.op_id[kernels], rows.role[kernels], rows.cost[kernels] = groups.ids[g][at], "own", cost[g][at]
    rows.share[kernels] = 1.0 / n
    notes = {k: _even_note(k) for k in np.unique(n).tolist()}
    rows.note[kernels] = [notes[k] for k in n.tolist()]
    return plain


def _tensor_units(table: OpTable, groups: _Groups, todo: np.ndarray, rows: Rows,
                  kernel_facts: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray],
                  tf32: tuple[bool | None, bool | None]) -> None:
    """Rules 2 and 3, with the TF32/FP64 judgements, for the units of tensor work: units of one cost whose
    kernels are alike (names, device, launching op: what the rules read) split alike, so each kind is worked
    out once and spread (a conv backward's split reads its output mask: each its own)."""
    op_ids, names, full, cc = kernel_facts
    policy, fp64 = tf32_rule(tf32, cc, full), fp64_tensor_rule(cc, full)
    member = np.zeros(len(groups.ids), dtype=bool)
    member[todo] = True
    g = groups.of_member()
    member = member[g]
    kernels, unit = groups.members[member], groups.ids[g][member]
    position = (np.arange(len(g)) - groups.start[g])[member]
    alike = row_codes(op_ids[kernels] == unit, table.name_codes(table.rows_of(op_ids[kernels])),
                      names[kernels], full[kernels], cc[kernels])[0].tolist()
    base = Distinct(table.costs_at(table.rows_of(groups.ids[todo])))
    flat: list[tuple[str, OpCost, float, str, str]] = []  # each kind's rows, kind after kind
    offset: dict[Any, int] = {}
    starts = np.r_[0, np.cumsum(groups.size[todo])].tolist()
    at = np.zeros(len(kernels), dtype="int64")
    for k, (g_, code) in enumerate(zip(todo.tolist(), base.codes.tolist(), strict=True)):
        u, name = int(groups.ids[g_]), table.name(int(groups.ids[g_]))
        key = (code, name, u if base_name(name) == "convolution_backward" else -1,
               tuple(alike[starts[k]:starts[k + 1]]))
        if key not in offset:
            members = groups.kernels(g_)
            split = _split(table, u, fp64(policy(base.objects[code], members), members), members, op_ids,
                           (names, full))
            offset[key] = len(flat)
            flat += [(r.role, r.cost, r.share, r.note, r.origin) for r in (split[i] for i in members)]
        at[starts[k]:starts[k + 1]] = offset[key]
    at += position
    role, cost, share, note, origin = (objects([r[f] for r in flat]) for f in range(5))
    rows.op_id[kernels], rows.role[kernels], rows.cost[kernels] = unit, role[at], cost[at]
    rows.share[kernels], rows.note[kernels], rows.origin[kernels] = (
        share[at].astype("float64"), note[at], origin[at])


def _split(table: OpTable, u: int, cost: OpCost, members: list[int], op_ids: np.ndarray,
           kernel_names: tuple[np.ndarray, np.ndarray]) -> dict[int, Row]:
    """The unit's cost over its kernels (rules 2 and 3); kernel_names: (short, full) names."""
    names, full = kernel_names
    if cost.roof_kind != "matmul":  # a norm, pointwise or reduction op: every kernel does its work
        return _even(u, cost, members, "own")
    aux = [i for i in members if _is_aux(table, u, int(op_ids[i]), str(names[i]))]
    if len(members) == 1 and not aux:
        return {members[0]: Row(u, "own", cost)}
    work = [i for i in members if i not in aux]
    recognized = [i for i in work
                  if WORK_KERNEL.search(str(full[i])) or _work_child(table, u, int(op_ids[i]))]
    if recognized:  # the other kernels beside a recognized GEMM/conv/attention kernel are helpers
        aux, work = [i for i in members if i not in recognized], recognized
    out = {i: Row(u, "aux", unknown(f"{_aux_kind(str(names[i]))} of {table.name(u)}: its tensors are not "
                                    "recorded; the op's FLOPs and bytes are on its GEMM/conv/attention "
                                    "kernels"))
           for i in aux}
    parts = _gradient_parts(table, u, [*work, *aux], full)
    if parts:
        for i, (part, count, what) in parts.items():
            out[i] = Row(u, "work", part, 1.0 / count, f"its {what} (the formula for that gradient alone)")
        return out
    out.update(_even(u, cost, work, "work"))
    return out


def _even(u: int, cost: OpCost, members: list[int], role: str) -> dict[int, Row]:
    n = len(members)
    note = _even_note(n)
    return {i: Row(u, role, cost, 1.0 / n, note) for i in members}


def _even_note(n: int) -> str:
    return f"1 of {n} kernels of one op: the trace does not say how the work divides" if n > 1 else ""


def _is_aux(table: OpTable, u: int, j: int, name: str) -> bool:
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


def _work_child(table: OpTable, u: int, j: int) -> bool:
    return j != u and bool(WORK_OP.search(base_name(table.name(j))))


def _gradient_parts(table: OpTable, u: int, members: list[int], names: np.ndarray
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
    if (any(g < 0 or not mask[g] for g in which.values())
            or {g for g in range(3) if mask[g]} != set(which.values())):
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


def _trace_costs(kernels: pd.DataFrame, rows: Rows) -> None:
    """Rule 4: a cost the trace states for a kernel replaces the formula's (the hook for Inductor's
    kernel_flop / kernel_num_gb). Where it states the bytes alone (Inductor's kernel_num_gb without
    kernel_flop: its pointwise and reduction kernels) the formula's FLOPs stay, and the label says so."""
    if "trace_flops" not in kernels:
        return
    flops = kernels["trace_flops"].astype("float64").to_numpy()
    nbytes = (kernels["trace_bytes"] if "trace_bytes" in kernels else pd.Series(np.nan, index=kernels.index)
              ).astype("float64").to_numpy()
    origin = texts(kernels, "trace_cost_source")
    for i in np.flatnonzero(~np.isnan(flops) | ~np.isnan(nbytes)).tolist():
        old = rows.cost[i]
        source = str(origin[i]) or "trace"
        prefix, _, label = source.partition(":")
        stated_flops, flops_label = flops[i], label or prefix
        if np.isnan(stated_flops) and old.known and not np.isnan(old.flops):
            stated_flops, flops_label = old.flops, f"{label or prefix} (bytes); FLOPs by {old.label}"
        rows.put(i, Row(int(rows.op_id[i]), rows.role[i] or "own",
                         OpCost(stated_flops, nbytes[i], label or prefix, flops_label,
                                old.precision or "fp32", "",
                                # the trace's bytes are DRAM bytes, whatever roof the formula's had
                                old.tensor_dtype, "" if old.roof_kind == LINK_LEVEL else old.roof_kind,
                                (old.flops_missing or old.missing) if np.isnan(stated_flops) else ""),
                         1.0, "", prefix))


# --------------------------------------------------------------------------- CPU traces and the op-level view


def _attribute_cpu(kernels: pd.DataFrame, table: OpTable) -> Attribution:
    """One row per op call in, the rows that count the op time once out: an op with a cost whole, an op
    without one (not under a costed op) with its self time."""
    op_ids = ints(kernels, "op_id")
    n = len(table.ids)
    every = np.arange(n, dtype="int64")
    priced = table.known_at(every)  # every op priced, at once
    # an op autocast called again at another dtype: not costed at the dtypes it was called with
    redispatched = table.redispatched(priced)
    known = priced & ~redispatched
    durations = table.frame["duration_us"].to_numpy(dtype="float64") if n else np.zeros(0)
    parent_row = table._parent_row
    has_parent = parent_row >= 0
    children_us = np.bincount(parent_row[has_parent], weights=durations[has_parent], minlength=n) if n \
        else np.zeros(0)
    rows = table.rows_of(op_ids) if len(op_ids) else np.zeros(0, dtype="int64")
    in_table = rows >= 0
    unit = np.full(len(op_ids), -1, dtype="int64")
    unit[in_table] = table.outermost_costed_at(rows[in_table], skip=redispatched)
    keep = np.flatnonzero((unit < 0) | (unit == op_ids))  # an op under a costed op is counted by that op
    kept_rows = rows[keep]
    self_us = np.where(kept_rows >= 0, np.maximum(durations[kept_rows] - children_us[kept_rows], 0.0),
                       np.nan) if n else np.full(len(keep), np.nan)
    own = np.where(unit[keep] == op_ids[keep], np.nan, self_us)
    out = kernels.iloc[keep].reset_index(drop=True)
    if len(out):
        seconds = out["gpu__time_duration.sum"].astype("float64").to_numpy()
        out["gpu__time_duration.sum"] = np.where(np.isnan(own), seconds, own * 1e-6)
        out["duration_source"] = pd.Series(np.where(np.isnan(own), "cpu_op dur",
                                                    "cpu_op dur - op children dur"), dtype=object)
    out["kernel_id"] = pd.array(range(len(out)), dtype="Int64")
    rows_out = Rows(len(out))
    present = np.flatnonzero(kept_rows >= 0)  # (every kept row: its op is in the table it came from)
    at = kept_rows[present]
    costed = present[known[at]]
    rows_out.cost[present] = table.costs_at(at)
    rows_out.op_id[costed], rows_out.role[costed] = op_ids[keep][costed], "own"
    costed_below = table.costed_inside(every[known])
    # a costed op inside: none of its own (torch.compile's wrappers keep their own reason: their time is
    # overhead, not a composite op's)
    composite = present[~known[at] & costed_below[at] & ~_wrappers(table.names[at])]
    rows_out.cost[composite] = objects([unknown(COMPOSITE_REASON)] * len(composite))
    autocast = present[redispatched[at]]
    rows_out.cost[autocast] = objects([unknown(REDISPATCH_REASON)] * len(autocast))
    analytic = analytic_table(out, rows_out)
    seen = np.isin(table.ids, op_ids)  # the ops of the selected steps
    units = np.unique(table.ids[_cpu_units(table, known, costed_below) & seen])
    unit_rows = table.rows_of(units)
    none = np.full(len(units), -1, dtype="int64")
    op_kernels, op_analytic = _units_table(out, table, _Units(
        units, table.costs_at(unit_rows), durations[unit_rows] * 1e-6,
        np.full(len(units), "cpu_op dur", dtype=object), none, np.ones(len(units), dtype="int64")))
    return Attribution(out, analytic, op_kernels, op_analytic)


def _cpu_units(table: OpTable, known: np.ndarray, any_below: np.ndarray) -> np.ndarray:
    """The ops of a CPU trace that carry their own cost (rule 1 without kernels), a mask by row: an op with a
    formula, unless an op inside it has a formula for the same kind of work (tensor work under a
    matmul/conv/attention op, any formula under another op): then it is a composite and adds nothing
    (aten::linear under which aten::addmm runs; aten::addmm's own copy of the bias is no such cover).
    `known`: the rows with a known cost; `any_below`: the rows with one of them inside
    (OpTable.costed_inside)."""
    every = np.arange(len(table.ids), dtype="int64")
    matmul = np.zeros(len(every), dtype=bool)
    matmul[known] = per_cost(table.costs_at(every[known]), lambda c: c.roof_kind == "matmul", bool)
    tensor_below = table.costed_inside(every[known & matmul])
    return known & ~np.where(matmul, tensor_below, any_below)


@dataclass
class _Units:
    """The op-level rows before their table, by op_id: each op's cost, time and the time's source, its first
    kernel's row (-1: none) and its launches."""

    ids: np.ndarray
    cost: np.ndarray
    seconds: np.ndarray
    source: np.ndarray
    first: np.ndarray
    launches: np.ndarray
    origin: np.ndarray | None = None  # each cost's origin (nsroof.costs.analytic_rows.Row); None: analytic


def _gpu_units(kernels: pd.DataFrame, table: OpTable, groups: _Groups, rows: Rows
               ) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The op-level rows of a GPU trace: per unit, its kernels' summed time and its (TF32-judged) cost."""
    seconds = kernels["gpu__time_duration.sum"].astype("float64").to_numpy() if len(kernels) else np.zeros(0)
    members, start, n = groups.members, groups.start, len(groups.members)
    role = rows.role[members]
    costs = rows.cost[members]
    judged = (role != "aux") & (role != "") & per_cost(costs, lambda c: c.known, bool)
    first = np.minimum.reduceat(np.where(judged, np.arange(n), n), start) if n else np.zeros(0, dtype="int64")
    only_aux = np.add.reduceat((role == "aux").astype("int64"), start) == groups.size if n else first > 0
    cost = table.costs_at(table.rows_of(groups.ids))
    # the TF32 judgement its kernels got: the first judged kernel's precision where it differs from the op's
    picked = costs[np.minimum(first, max(n - 1, 0))] if n else cost
    differs = (first < n) & (per_cost(picked, lambda c: c.precision) != per_cost(cost, lambda c: c.precision))
    judgements: dict[tuple[int, int], OpCost] = {}
    for g in np.flatnonzero(differs).tolist():
        c, k = cost[g], picked[g]
        if (id(c), id(k)) not in judgements:
            judgements[id(c), id(k)] = replace(c, precision=k.precision, tensor_dtype=k.tensor_dtype,
                                               label=k.label if k.formula == c.formula else c.label)
        cost[g] = judgements[id(c), id(k)]
    # an op launching one kernel whose cost the trace states (rule 4: Inductor's launch record) has that cost
    origin = np.full(len(groups.ids), "analytic", dtype=object)
    first_row = members[start] if n else np.zeros(0, dtype="int64")
    stated = np.flatnonzero((groups.size == 1) & (rows.origin[first_row] != "analytic")) if n else first_row
    cost[stated], origin[stated] = rows.cost[first_row[stated]], rows.origin[first_row[stated]]
    total = _sums(seconds, groups)
    source = np.full(len(groups.ids), "sum of its kernels' gpu__time_duration.sum", dtype=object)
    for g in np.flatnonzero(only_aux).tolist():  # its helpers alone: the sample lost the work kernel
        source[g] = (f"its GEMM/conv/attention kernel is not in the trace (its {groups.size[g]} helper "
                     f"kernel(s) ran {total[g] * 1e6:.3g} us)")
    total[only_aux] = np.nan
    return _units_table(kernels, table, _Units(groups.ids, cost, total, source, members[start], groups.size,
                                               origin))


def _sums(seconds: np.ndarray, groups: _Groups) -> np.ndarray:
    """Each group's summed kernel time, as numpy's sum of its kernels' times adds them (in order, from 0, for
    fewer than 8 values; pairwise beyond)."""
    small = groups.size < 8
    g = groups.of_member()
    at = small[g]
    out = np.bincount(g[at], weights=seconds[groups.members[at]], minlength=len(groups.ids)).astype("float64")
    for k in np.flatnonzero(~small).tolist():
        out[k] = seconds[groups.kernels(k)].sum()
    return out


def _units_table(kernels: pd.DataFrame, table: OpTable, units: _Units) -> tuple[pd.DataFrame, pd.DataFrame]:
    """A kernel-like table (kind 'op', kernel_id = op_id, launches = its kernels; declared in
    nsroof.schema.OP_LEVEL_KERNEL_COLUMNS) and its analytic table: the op-level view goes through the same
    quantities and classification as the kernel rows."""
    ids = units.ids.tolist()
    source = str(texts(kernels.iloc[:1], "source")[0]) if len(kernels) else ""

    def of_kernel(name: str) -> np.ndarray:
        values = texts(kernels, name)
        return values[np.maximum(units.first, 0)] if len(values) else np.full(len(ids), "", dtype=object)

    # a column read whole, then indexed (a DataFrame cell lookup per op is slow)
    at = table.rows_of(units.ids)
    of_op = {c: table.columns[c].to_numpy(dtype=object)[at].tolist() for c in ("module", "nvtx_path")}

    names = [str(v) for v in table.names[at].tolist()]
    op_kernels = pd.DataFrame({
        "source": pd.Series([source] * len(ids), dtype=object),
        "kernel_id": pd.array(ids, dtype="Int64"),
        "kind": pd.Series(["op"] * len(ids), dtype=object),
        "kernel_name": pd.Series(names, dtype=object),
        "function": pd.Series(names, dtype=object),
        "op": pd.Series(names, dtype=object),
        "op_id": pd.array(ids, dtype="Int64"),
        "input_shapes": pd.Series(table.shape_texts(at), dtype=object),
        "module": pd.Series([str(v) for v in of_op["module"]], dtype=object),
        "nvtx_path": pd.Series([str(v) for v in of_op["nvtx_path"]], dtype=object),
        "device": pd.Series(of_kernel("device"), dtype=object),
        "cc": pd.Series(of_kernel("cc"), dtype=object),
        "launches": pd.array(units.launches, dtype="Int64"),
        "gpu__time_duration.sum": np.asarray(units.seconds, dtype="float64"),
        "duration_source": pd.Series(units.source, dtype=object),
        # a unit of unknown time says why where its (first) kernel does (GPU activity not recorded)
        "duration_missing": pd.Series(np.where(np.isnan(np.asarray(units.seconds, dtype="float64")),
                                               of_kernel("duration_missing"), ""), dtype=object),
    })
    rows = Rows(len(ids))
    rows.op_id[:], rows.role[:], rows.cost[:] = units.ids, "own", units.cost
    if units.origin is not None:
        rows.origin[:] = units.origin
    return op_kernels, analytic_table(op_kernels, rows)


def _no_ops() -> pd.DataFrame:
    from nsroof.schema import OP_COLUMNS

    return pd.DataFrame({c: pd.Series([], dtype=d) for c, (d, _, _) in OP_COLUMNS.items()})
