"""Roofline quantities per kernel from whatever counters an export holds, with provenance.

CONTRACT (used by nsroof.roofs.classify): `derive(kernels) -> DataFrame` with the same index as `kernels`
and the columns nsroof.schema.QUANTITY_FIELDS declares, in that order, with their units: duration,
FLOPs per precision, bytes per level, the export's own ceilings, each with its source, and
missing_<quantity> naming the metrics whose absence left a quantity NaN.

Partial counter sets follow metric_formulas.PARTIAL_RULES: a precision with some of its terms is a lower
bound (its source says which terms it lacks); with no CUDA-core FP counter at all, `flops` is the tensor
count as a lower bound when that is > 0, else NaN — never 0 FLOPs from counters that were not collected.

Every quantity comes from the first formula of nsroof.counters.metric_formulas whose inputs the
kernel has (per row: one kernel may fall through to a later formula than its neighbour). A counter
present and 0 gives 0; an absent counter (or n/a) makes its formula not apply; when no formula
applies, the quantity is NaN and missing_<quantity> names the inputs of the preferred formula that
the kernel lacks. Ceilings of memory levels are taken only from the same byte definition as the
kernel's bytes (L2 lts__t vs lts2xbar, L1 l1tex__t vs LSU writeback), never mixed.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from nsroof.counters import dimensions
from nsroof.counters import metric_formulas as mf
from nsroof.counters import tensor_paths as tp
from nsroof.counters.metric_formulas import DURATION, TENSOR_FLOP_PER_INST, CounterFormula
from nsroof.frames.distinct import map_rows, row_codes, spread
from nsroof.schema import LEVELS, PRECISIONS

_FLOAT = "float64"


@dataclass
class _Resolved:
    value: np.ndarray  # float64
    source: np.ndarray  # object: provenance string or ""
    missing: np.ndarray  # object: comma-separated metric names or ""
    definition: np.ndarray  # object: byte definition of the formula used, or ""
    estimated: np.ndarray  # bool


class _Kernels:
    """Column access on the kernel table as float arrays (absent or non-numeric → NaN)."""

    def __init__(self, kernels: pd.DataFrame) -> None:
        self.frame = kernels
        self.n = len(kernels)
        self.columns = [str(c) for c in kernels.columns]
        self._present = set(self.columns)
        self._cache: dict[str, np.ndarray] = {}
        self.bad: dict[str, np.ndarray] = {}  # metric -> its refused values (inf, < 0) per row, NaN elsewhere
        frame = self.frame
        cc = frame["cc"] if "cc" in frame.columns else pd.Series([""] * self.n, index=frame.index)
        # one device's CC over thousands of launches: each distinct value normalized once
        raw_cc = cc.astype(object).where(cc.notna(), "").to_numpy(dtype=object)
        codes, first = row_codes(raw_cc)
        distinct = [tp.normalize_cc(raw_cc[i]) for i in first.tolist()]
        self.cc = np.array(distinct, dtype=object)[codes]
        self.cc_num = np.array([float(c) if c else np.nan for c in distinct], dtype=_FLOAT)[codes]
        self.duration_s = np.full(self.n, np.nan)
        self.tensor_flop_per_inst = np.array(
            [tp.tensor_flop_per_inst_by_cc().get(c, np.nan) for c in distinct], dtype=_FLOAT)[codes]

    def has(self, name: str) -> bool:
        return name in self._present

    def col(self, name: str) -> np.ndarray:
        if name == DURATION:
            return self.duration_s
        if name == TENSOR_FLOP_PER_INST:
            return self.tensor_flop_per_inst
        if name not in self._cache:
            if name in self._present:
                values = pd.to_numeric(self.frame[name], errors="coerce").to_numpy(
                    dtype=_FLOAT, na_value=np.nan)
                # every counter the formulas read (durations, bytes, instructions, cycles, peaks) is finite
                # and >= 0: anything else is a damaged input, never a number to compute with
                with np.errstate(invalid="ignore"):
                    bad = np.isinf(values) | (values < 0)
                if bad.any():
                    self.bad[name] = np.where(bad, values, np.nan)
                    values = np.where(bad, np.nan, values)
                self._cache[name] = values
            else:
                self._cache[name] = np.full(self.n, np.nan)
        return self._cache[name]


def _scale(k: _Kernels, f: CounterFormula, acc: np.ndarray) -> np.ndarray:
    for t in f.times:
        acc = acc * k.col(t)
    for d in f.divide_by:
        den = k.col(d)
        with np.errstate(divide="ignore", invalid="ignore"):
            acc = np.where(den != 0, acc / den, np.nan)
    return acc


def _evaluate_linear(k: _Kernels, f: CounterFormula) -> np.ndarray:
    acc = np.zeros(k.n)
    for coefficient, metric in f.terms:
        acc = acc + coefficient * k.col(metric)  # NaN propagates: every term is required
    return _scale(k, f, acc)


@dataclass
class _TensorOps:
    total: np.ndarray
    sparse: np.ndarray
    dominant: np.ndarray  # object: base metric name or ""


def _evaluate_tensor_ops(k: _Kernels, f: CounterFormula) -> _TensorOps:
    paths = tp.select_tensor_metrics(k.columns, f.tensor_suffix)
    if not paths:
        nan = np.full(k.n, np.nan)
        return _TensorOps(nan, nan.copy(), np.full(k.n, "", dtype=object))
    matrix = np.column_stack([k.col(p.base + f.tensor_suffix) for p in paths])
    factor = _scale(k, f, np.ones(k.n))
    any_value = ~np.isnan(matrix).all(axis=1)
    # An n/a path is one the chip does not have: it carries no work, so the sum skips it; the
    # total is NaN only when no path has a value.
    total = np.where(any_value, np.nansum(matrix, axis=1), np.nan) * factor
    sparse_cols = [i for i, p in enumerate(paths) if p.sparsity == "sparse"]
    if sparse_cols:
        sub = matrix[:, sparse_cols]
        sparse = np.where(~np.isnan(sub).all(axis=1), np.nansum(sub, axis=1), np.nan) * factor
    else:
        sparse = np.full(k.n, np.nan)
    filled = np.where(np.isnan(matrix), -np.inf, matrix)
    best = filled.argmax(axis=1)
    has_work = filled.max(axis=1) > 0
    names = np.array([p.base for p in paths], dtype=object)
    dominant = np.where(has_work, names[best], "")
    return _TensorOps(total, sparse, dominant.astype(object))


def _missing_names(k: _Kernels, f: CounterFormula, rows: np.ndarray) -> np.ndarray:
    """Comma-separated inputs of `f` that each row lacks (for rows where the quantity is NaN).

    The text depends only on which inputs a row lacks, so it is joined once per distinct pattern (a
    per-row join was 0.2 s of a 9,000-kernel export); rows holding a refused value, named with it
    (`gpu__time_duration.sum=-1e-06`), are joined one by one."""
    out = np.full(k.n, "", dtype=object)
    if not rows.any():
        return out
    if f.kind in ("tensor_ops", "tensor_peak"):
        out[rows] = ", ".join(f.metrics)
        return out
    every = bool(rows.all())
    idx = np.arange(k.n) if every else np.flatnonzero(rows)
    labels = list(f.metrics)
    lacks = [np.isnan(k.col(metric)) if every else np.isnan(k.col(metric))[idx] for metric in f.metrics]
    refused = np.zeros(len(idx), dtype=bool)
    for metric, lack in zip(f.metrics, lacks, strict=True):
        if metric in k.bad:
            refused |= lack & ~np.isnan(k.bad[metric][idx])
    if f.cc_max is not None:
        labels.append(f"cc<= {f.cc_max:g}")
        lacks.append(~(k.cc_num[idx] <= f.cc_max))
    if all(lack.all() or not lack.any() for lack in lacks):  # one pattern for every row (the usual export)
        out[idx] = ", ".join(label for label, lack in zip(labels, lacks, strict=True) if lack[0])
    else:
        codes, first = row_codes(*lacks)
        texts = np.array([", ".join(label for label, lack in zip(labels, lacks, strict=True) if lack[j])
                          # the extra "" keeps one pattern one-dimensional
                          for j in first] + [""], dtype=object)
        out[idx] = texts[codes]
    for j in np.flatnonzero(refused):
        i = idx[j]
        named = [f"{label}={k.bad[label][i]:g}" if label in k.bad and not np.isnan(k.bad[label][i]) else label
                 for label, lack in zip(labels, lacks, strict=True) if lack[j]]
        out[i] = ", ".join(named)
    return out


def _reads_absent(k: _Kernels, f: CounterFormula) -> bool:
    """Whether `f` reads a counter the export lacks altogether: its value is then NaN on every row (an absent
    counter is NaN, and NaN propagates through every kind of formula), so it need not be evaluated. A trace
    holds one duration counter: most formulas read none it has."""
    return any(not k.has(m) for m in (*(m for _, m in f.terms), *f.times, *f.divide_by)
               if m not in (DURATION, TENSOR_FLOP_PER_INST))


def _resolve(k: _Kernels, quantity: str, *, match_definition: np.ndarray | None = None,
             tensor: dict[str, _TensorOps] | None = None) -> _Resolved:
    """Try the formulas of `quantity` in order, per row."""
    value = np.full(k.n, np.nan)
    source = np.full(k.n, "", dtype=object)
    definition = np.full(k.n, "", dtype=object)
    estimated = np.zeros(k.n, dtype=bool)
    formulas = mf.formulas_for(quantity)
    for f in formulas:
        open_rows = np.isnan(value)
        if not open_rows.any():
            break
        if _reads_absent(k, f):  # NaN on every row: nothing to take
            continue
        if f.kind == "tensor_ops":
            ops = _evaluate_tensor_ops(k, f)
            v = ops.total
            if tensor is not None:
                tensor[f.tensor_suffix + "|" + "×".join(f.times)] = ops
        elif f.kind == "tensor_estimate":
            count = _evaluate_linear(k, CounterFormula(f.quantity, f.terms))
            # a zero count is exactly zero FLOPs whatever the per-instruction factor
            v = np.where(count == 0, 0.0, count * k.tensor_flop_per_inst)
        else:
            v = _evaluate_linear(k, f)
        if quantity.startswith(("peak_", "bandwidth_")):
            v = np.where(v > 0, v, np.nan)  # a roof of 0 is a damaged counter (e.g. 1e-400), never a ceiling
        take = open_rows & ~np.isnan(v)
        if f.cc_max is not None:
            take &= k.cc_num <= f.cc_max
        if match_definition is not None and f.definition:
            take &= (match_definition == "") | (match_definition == f.definition)
        value[take] = v[take]
        if f.kind == "tensor_estimate":
            # name the factor actually used, so the number stays traceable
            for factor in np.unique(k.tensor_flop_per_inst[take]):
                rows = take & (k.tensor_flop_per_inst == factor)
                source[rows] = f.provenance.replace(TENSOR_FLOP_PER_INST,
                                                    f"{factor:g} (FLOP/instruction at this CC)")
            zero = take & np.isnan(k.tensor_flop_per_inst)  # 0 instructions: exact whatever the factor
            source[zero] = f.provenance.replace(TENSOR_FLOP_PER_INST, "any factor (0 instructions)")
        else:
            source[take] = f.provenance
        definition[take] = f.definition
        if f.estimated:
            estimated[take] = v[take] != 0
    missing = _missing_names(k, formulas[0], np.isnan(value))
    return _Resolved(value, source, missing, definition, estimated)


def _partial_flops(k: _Kernels, res: _Resolved, quantity: str) -> None:
    """Rows where no formula of a CUDA-core precision applied but some of its terms were collected (HFMA
    without HADD/HMUL): the sum of the terms present, a lower bound whose source names the absent ones.
    The first linear formula with a term present (and its clocks) wins, as for complete formulas."""
    for f in mf.formulas_for(quantity):
        open_rows = np.isnan(res.value)
        if not open_rows.any():
            return
        # an absent counter is NaN on every row: no need to look
        present = [(c, m) for c, m in f.terms
                   if (k.has(m) or m in (DURATION, TENSOR_FLOP_PER_INST))
                   and not np.isnan(k.col(m)[open_rows]).all()]
        if f.kind != "linear" or not present:
            continue
        present_masks = [~np.isnan(k.col(m)) for _, m in f.terms]
        values = [np.nan_to_num(k.col(m)) for _, m in f.terms]
        acc = _scale(k, f, sum(c * v for (c, _), v in zip(f.terms, values, strict=True)))
        take = open_rows & np.logical_or.reduce(present_masks) & ~np.isnan(acc)
        rows = np.flatnonzero(take)
        if rows.size:
            # one provenance text per pattern of present terms (thousands of launches share a few)
            codes, first = row_codes(*[mask[rows] for mask in present_masks])
            texts = []
            for i in rows[first].tolist():
                kept = tuple(t for t, mask in zip(f.terms, present_masks, strict=True) if mask[i])
                lacking = [m for (_, m), mask in zip(f.terms, present_masks, strict=True) if not mask[i]]
                expression = CounterFormula(quantity, kept, times=f.times, divide_by=f.divide_by).expression
                texts.append(f"{expression} (lower bound: lacks {', '.join(lacking)})")
            res.source[rows] = np.array(texts, dtype=object)[codes]
        res.value[take] = acc[take]


def _tensor_resolution(k: _Kernels) -> tuple[_Resolved, np.ndarray, np.ndarray]:
    """Tensor FLOPs, plus per row the sparse share and the dominant metric of the formula used."""
    per_formula: dict[str, _TensorOps] = {}
    res = _resolve(k, "flops_tensor", tensor=per_formula)
    sparse = np.full(k.n, np.nan)
    dominant = np.full(k.n, "", dtype=object)
    for f in mf.formulas_for("flops_tensor"):
        if f.kind != "tensor_ops":
            continue
        ops = per_formula.get(f.tensor_suffix + "|" + "×".join(f.times))
        if ops is None:
            continue
        used = res.source == f.provenance
        sparse[used] = ops.sparse[used]
        dominant[used] = ops.dominant[used]
    # no 2:4 sparsity before Ampere: a known tensor count there has no sparse part
    sparse[(k.cc_num < tp.first_sparse_cc()) & ~np.isnan(res.value)] = 0.0
    return res, sparse, dominant


def _tensor_peak(k: _Kernels, dominant: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Peak of the kernel's dominant tensor path × SM clock; NaN where that path's peak mixes dense and
    sparse rates (an unsplit aggregate on CC >= 8.0, e.g. GH100 src_fp16: its peak is the 2:4 sparse rate)."""
    (f,) = mf.formulas_for("peak_flop_per_s_tensor")
    value = np.full(k.n, np.nan)
    source = np.full(k.n, "", dtype=object)
    clock = _scale(k, f, np.ones(k.n))
    pre_sparsity = k.cc_num < tp.first_sparse_cc()  # Turing: unsplit metrics are dense work
    for base in sorted({d for d in dominant if d}):
        path = tp.tensor_path(base)
        if path is None:
            continue
        rows = dominant == base
        if path.sparsity == "unsplit":
            rows &= pre_sparsity
        peak_metric = f"{base}.sum.peak_sustained"
        v = k.col(peak_metric) * clock
        take = rows & ~np.isnan(v)
        value[take] = v[take]
        source[take] = "ncu:" + " × ".join((peak_metric, *f.times))
    return value, source


def _join_rows(columns: list[np.ndarray], sep: str) -> np.ndarray:
    """Per row, the columns' texts joined with `sep`, each once, in order (", "-separated texts count
    token by token); computed once per distinct row."""
    if not columns:
        return np.full(0, "", dtype=object)

    return map_rows(lambda *values: _join_one(values, sep), *columns)


def _join_one(values: Sequence[object], sep: str) -> str:
    seen: list[str] = []
    for value in values:
        for token in (str(value).split(", ") if sep == ", " else [str(value)]):
            if token and token not in seen:
                seen.append(token)
    return sep.join(seen)


# why a launch without any value has NaN everywhere (ncu prints `n/a` for every metric of a failed launch)
NO_VALUES = "no value recorded for this launch (every counter n/a: a failed or unprofiled launch)"


def _without_values(k: _Kernels) -> np.ndarray:
    """Launches for which the export holds counters but not one value among those the formulas read."""
    read = [c for c in k.columns if dimensions.is_read(c)]
    if len(read) < 2:  # one duration column (a trace) says nothing about a failed launch
        return np.zeros(k.n, dtype=bool)
    empty = np.ones(k.n, dtype=bool)
    for c in read:
        empty &= np.isnan(k.col(c))  # a refused value (inf, < 0) is a value: k.bad holds it
        if c in k.bad:
            empty &= np.isnan(k.bad[c])
    return empty


# Byte counters that miss stores (data returned to the SMs: loads only) and the write-inclusive
# definition of the same level (roofline-metrics.md §4): lts2xbar is L2 -> crossbar, the LSU writeback
# is L1 -> registers; lts__t / l1tex__t count every sector the level's tag stage served.
READ_ONLY_DEFINITIONS: dict[str, tuple[frozenset[str], str, str]] = {
    "l2": (frozenset({"lts2xbar"}), "lts__t", "lts__t_bytes.sum or lts__t_sectors.sum"),
    "l1": (frozenset({"lsu_lg", "lsu_lgds", "lsu"}), "l1tex__t",
           "l1tex__t_bytes.sum or l1tex__t_sectors.sum"),
}


# what a read-only count below DRAM bytes adds to its bytes_source (the summary counts the rows that say it)
READ_ONLY_LOWER_BOUND = "reads only, below DRAM bytes: a lower bound"


def _write_inclusive(k: _Kernels, level: str, res: _Resolved, dram: np.ndarray) -> _Resolved:
    """Where a read-only counter gave fewer bytes at this level than DRAM moved (a write-heavy kernel: its
    stores pass the level uncounted), the write-inclusive counter of the export instead, its roof with it
    (bandwidths are matched by definition); without one, the provenance calls the value a lower bound."""
    if level not in READ_ONLY_DEFINITIONS:  # DRAM: the reference the others are checked against
        return res
    read_only, inclusive, wanted = READ_ONLY_DEFINITIONS[level]
    short = np.isin(res.definition, list(read_only)) & (res.value < dram)
    if not short.any():
        return res
    alt = _resolve(k, f"bytes_{level}", match_definition=np.full(k.n, inclusive, dtype=object))
    take = short & ~np.isnan(alt.value) & (alt.definition == inclusive)
    value, source, definition = res.value.copy(), res.source.copy(), res.definition.copy()
    for i in np.flatnonzero(take):
        value[i], definition[i] = alt.value[i], inclusive
        source[i] = f"{alt.source[i]} (write-inclusive: {res.source[i]} counted fewer bytes than DRAM)"
    for i in np.flatnonzero(short & ~take):  # the value stands (a lower bound); its provenance says so
        source[i] = f"{res.source[i]} ({READ_ONLY_LOWER_BOUND}; collect {wanted})"
    return _Resolved(value, source, res.missing, definition, res.estimated)


def _duration(k: _Kernels) -> _Resolved:
    """The duration; a launch without any value (a failed launch), or one whose importer says why it has
    none (the kernel table's duration_missing), says so in `missing`."""
    duration = _resolve(k, "duration_s")
    duration.missing[_without_values(k)] = NO_VALUES
    if k.has("duration_missing"):  # the importer knows why (a trace that did not record the GPU side)
        why = k.frame["duration_missing"].astype(object).where(k.frame["duration_missing"].notna(), "")
        rows = np.isnan(duration.value) & (why.to_numpy(dtype=object) != "")
        duration.missing[rows] = why.to_numpy(dtype=object)[rows]
    return duration


@dataclass
class _Flops:
    """FLOPs per precision as resolved, with the tensor formula's sparse share and dominant metric."""

    by_precision: dict[str, _Resolved]
    known: np.ndarray  # bool (kernels, PRECISIONS): the precision has a count
    sparse: np.ndarray
    dominant: np.ndarray
    _source_codes: tuple[np.ndarray, np.ndarray] | None = None

    def sources(self) -> list[np.ndarray]:
        return [self.by_precision[p].source for p in PRECISIONS]

    def source_codes(self) -> tuple[np.ndarray, np.ndarray]:
        """row_codes of the precisions' sources, keyed once for every per-row text made from them."""
        if self._source_codes is None:
            self._source_codes = row_codes(*self.sources())
        return self._source_codes


def _resolve_flops(k: _Kernels) -> _Flops:
    flops: dict[str, _Resolved] = {p: _resolve(k, f"flops_{p}") for p in ("fp64", "fp32", "fp16")}
    for p in ("fp64", "fp32", "fp16"):
        _partial_flops(k, flops[p], f"flops_{p}")
    tensor, sparse, dominant = _tensor_resolution(k)
    flops["tensor"] = tensor
    matrix = np.column_stack([flops[p].value for p in PRECISIONS]) if k.n else np.zeros((0, len(PRECISIONS)))
    return _Flops(flops, ~np.isnan(matrix), sparse, dominant)


def _flop_columns(k: _Kernels, flops: _Flops) -> dict[str, object]:
    """flops_<precision>, their total `flops` (NaN where it would be a verdict from damage or from
    counters never collected), its source and whether any term is an estimate."""
    known = flops.known
    values = [flops.by_precision[p].value for p in PRECISIONS]
    cols: dict[str, object] = {f"flops_{p}": v for p, v in zip(PRECISIONS, values, strict=True)}
    matrix = np.column_stack(values) if k.n else np.zeros((0, len(PRECISIONS)))
    total = np.where(known.any(axis=1), np.nansum(np.where(known, matrix, 0.0), axis=1), np.nan)
    # a precision left NaN by a refused counter value (inf, < 0) is damage, not an absent counter: no
    # partial sum then (it would be a verdict from a bad number)
    flop_inputs = {m for p in PRECISIONS for f in mf.formulas_for(f"flops_{p}") for m in f.metrics}
    refused = np.zeros(k.n, dtype=bool)
    for name, bad in k.bad.items():
        if name in flop_inputs or name.startswith(("sm__ops_path_tensor", "sm__inst_executed_pipe_tensor")):
            refused |= ~np.isnan(bad)
    total[refused & ~known.all(axis=1)] = np.nan
    # No CUDA-core counter collected: the tensor count alone is a lower bound when positive, and says
    # nothing when 0 (PARTIAL_RULES) — a kernel is not FLOP-free because FFMA was not asked for.
    no_core = ~known[:, :3].any(axis=1) if k.n else np.zeros(0, dtype=bool)
    total[no_core & ~(total > 0)] = np.nan
    cols["flops"] = total
    noted = no_core & (total > 0)
    no_core_note = np.where(noted, "lower bound: no CUDA-core FP counters collected", "")
    # "fp32: <formula>; tensor: <formula>", built once per distinct combination of formulas
    cols["flops_source"] = spread(
        lambda note, *sources: _join_one([f"{p}: {s}" if s else ""
                                          for p, s in zip(PRECISIONS, sources, strict=True)]
                                         + [note], "; "),
        *row_codes(flops.source_codes()[0], noted), no_core_note, *flops.sources())
    cols["flops_estimated"] = np.logical_or.reduce([flops.by_precision[p].estimated for p in PRECISIONS])
    return cols


def _resolve_bytes(k: _Kernels) -> dict[str, _Resolved]:
    """Bytes per level, DRAM first: the L2/L1 read-only counters are checked against it."""
    out: dict[str, _Resolved] = {}
    for level in LEVELS:
        dram = out["dram"].value if "dram" in out else np.asarray(None, dtype=float)
        out[level] = _write_inclusive(k, level, _resolve(k, f"bytes_{level}"), dram)
    return out


def _ceiling_columns(k: _Kernels, byte_definitions: dict[str, np.ndarray],
                     dominant: np.ndarray) -> dict[str, object]:
    """The export's own peaks and bandwidths, each with its source; a level's bandwidth of the same byte
    definition as its bytes."""
    cols: dict[str, object] = {}
    for p in ("fp64", "fp32", "fp16"):
        peak = _resolve(k, f"peak_flop_per_s_{p}")
        cols[f"peak_flop_per_s_{p}"] = peak.value
        cols[f"ceiling_source_{p}"] = peak.source
    cols["peak_flop_per_s_tensor"], cols["ceiling_source_tensor"] = _tensor_peak(k, dominant)
    for level in LEVELS:
        bw = _resolve(k, f"bandwidth_bytes_per_s_{level}", match_definition=byte_definitions[level])
        cols[f"bandwidth_bytes_per_s_{level}"] = bw.value
        cols[f"ceiling_source_{level}"] = bw.source
    return cols


def _first_present(k: _Kernels, names: Sequence[str]) -> np.ndarray:
    """Per row, the first of the counters `names` that has a value."""
    out = np.full(k.n, np.nan)
    for name in names:
        out = np.where(np.isnan(out), k.col(name), out)
    return out


def _tensor_counter_columns(k: _Kernels, flops: _Flops) -> dict[str, object]:
    """The raw tensor counters beside the FLOPs: instructions where the count is an estimate from them,
    and active cycles."""
    tensor = flops.by_precision["tensor"]
    estimate = spread(lambda source: "pipe_tensor" in str(source), *flops.source_codes(),
                      tensor.source).astype(bool)
    inst = _first_present(k, ("sm__inst_executed_pipe_tensor.sum", "smsp__inst_executed_pipe_tensor.sum"))
    return {"tensor_inst": np.where(estimate, inst, np.nan),
            "tensor_cycles_active": _first_present(k, tp.TENSOR_ACTIVE_CYCLES)}


def derive(kernels: pd.DataFrame) -> pd.DataFrame:
    """Per-kernel roofline quantities with provenance; see the module docstring for the columns."""
    k = _Kernels(kernels)
    duration = _duration(k)
    k.duration_s = duration.value
    cols: dict[str, object] = {"duration_s": duration.value, "duration_source": duration.source}

    flops = _resolve_flops(k)
    cols |= _flop_columns(k, flops)
    levels = _resolve_bytes(k)
    for level in LEVELS:
        cols[f"bytes_{level}"] = levels[level].value
        cols[f"bytes_source_{level}"] = levels[level].source
        definition = levels[level].definition
        cols[f"bytes_counter_{level}"] = np.array(
            [mf.COUNTER_OF_DEFINITION.get(d, d) for d in definition.tolist()], dtype=object)
    cols |= _ceiling_columns(k, {level: levels[level].definition for level in LEVELS}, flops.dominant)

    cols["missing_duration"] = duration.missing
    cols["missing_flops"] = _join_rows([flops.by_precision[p].missing for p in PRECISIONS], ", ")
    for level in LEVELS:
        cols[f"missing_{level}"] = levels[level].missing

    for p in PRECISIONS:
        cols[f"flops_source_{p}"] = flops.by_precision[p].source
    known = flops.known
    cols["flops_partial"] = (known.any(axis=1) & ~known.all(axis=1)) | spread(
        lambda *sources: any("lower bound" in str(s) for s in sources), *flops.source_codes(),
        *flops.sources()
    ).astype(bool)
    cols |= _tensor_counter_columns(k, flops)
    for unit in ("sm", "dram", "l2", "l1"):
        cols[f"clock_hz_{unit}"] = _resolve(k, f"clock_hz_{unit}").value
    cols["flops_tensor_sparse"] = flops.sparse
    cols["tensor_metric"] = flops.dominant
    _note_value_basis(cols, kernels)
    return _frame(cols, kernels.index)


def _note_value_basis(cols: dict[str, object], kernels: pd.DataFrame) -> None:
    """Rows whose values are not one launch's own (an ncu per-kernel summary's averages: the kernel table's
    value_basis) say so in the provenance of every quantity made from them."""
    if "value_basis" not in kernels.columns:
        return
    basis = kernels["value_basis"].astype(object).where(kernels["value_basis"].notna(), "").to_numpy()
    rows = np.flatnonzero(basis != "")
    if not rows.size:
        return
    names = ["duration_source", "flops_source", *(f"flops_source_{p}" for p in PRECISIONS),
             *(f"bytes_source_{level}" for level in LEVELS)]
    for name in names:
        texts = np.asarray(cols[name], dtype=object).copy()
        for i in rows.tolist():
            if texts[i]:
                texts[i] = f"{texts[i]} ({basis[i]})"
        cols[name] = texts


_BOOL_COLUMNS = ("flops_estimated", "flops_partial")


def _frame(cols: dict[str, object], index: pd.Index) -> pd.DataFrame:
    data: dict[str, object] = {}
    for name, values in cols.items():
        arr = np.asarray(values)
        if name in _BOOL_COLUMNS:
            data[name] = arr.astype(bool)
        elif arr.dtype.kind == "f":
            data[name] = arr.astype(_FLOAT, copy=False)
        else:
            # text stays a plain object column of str, as the report keeps it: build_report reads these
            # as object arrays, and an Arrow-backed `str` column costs a conversion each way
            data[name] = pd.Series(arr.astype(object), index=index, dtype=object)
    return pd.DataFrame(data, index=index, copy=False)

