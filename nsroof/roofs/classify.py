"""Build the report: one row per (kernel, memory level), classified against its roofs.

Inputs are the normalized kernel table (nsroof.importers.kernel_table) and the per-kernel
quantities (nsroof.counters.quantities.derive contract). The roofs — the export's ncu figures, else
the machine's (--machine as a what-if, or the datasheet entry matched from the device name, at the
recorded clocks) — come from nsroof.roofs.ceilings.resolve_roofs, their one home.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from nsroof.frames.arrays import all_missing
from nsroof.frames.columns import texts as _text
from nsroof.frames.distinct import map_rows, row_codes, spread
from nsroof.roofs import roofline
from nsroof.roofs.ceilings import MachineResolver, Roofs, resolve_roofs
from nsroof.roofs.ceilings import column as _col
from nsroof.roofs.machines import Machine
from nsroof.schema import COLUMNS, FIELD_BY_NAME, LEVELS, LINK_LEVEL, PRECISIONS


def _join(*parts: str) -> str:
    """Comma-join the non-empty parts, each token once, in order."""
    present = [p for p in parts if p]
    if len(present) <= 1:
        return present[0] if present else ""
    seen: dict[str, None] = {}
    for p in present:
        for token in p.split(","):
            token = token.strip()
            if token:
                seen[token] = None
    return ", ".join(seen)



def build_report(
    kernels: pd.DataFrame,
    quantities: pd.DataFrame,
    machine: Machine | None = None,
    *,
    levels: Sequence[str] = LEVELS,
    resolver: MachineResolver | None = None,
) -> pd.DataFrame:
    """Classify every kernel at every level. Rows come out kernel-major, levels in `levels` order."""
    if len(kernels) != len(quantities):
        raise ValueError("kernels and quantities must describe the same rows")
    kernels = kernels.reset_index(drop=True)
    roofs = resolve_roofs(kernels, quantities.reset_index(drop=True), machine, levels=levels,
                          resolver=resolver)
    q = roofs.quantities
    columns = _row_columns(kernels, q, roofs, levels)
    columns.update(_level_columns(q, roofs, levels))
    _link_rows(columns, q, roofs, levels)
    return _analytic_ledger(_classified(columns, pd.RangeIndex(len(kernels) * len(levels))),
                            _text(q, "ledger_label"), levels)


def categories(kernels: pd.DataFrame) -> np.ndarray:
    """Each row's category (nsroof.names.categories): the ledger, for the op families, is loaded only when a
    row names an op (an ncu export never loads it)."""
    from nsroof.names.categories import categorize

    ops = _text(kernels, "op")
    if not (ops != "").any():
        return categorize(_text(kernels, "kind"), ops, _names(kernels), _text(kernels, "nvtx_path"))
    from nsroof.costs.ledger.aten import family

    return categorize(_text(kernels, "kind"), ops, _names(kernels), _text(kernels, "nvtx_path"), family)


def _names(kernels: pd.DataFrame) -> np.ndarray:
    function = _text(kernels, "function")
    return np.where(function != "", function, _text(kernels, "kernel_name"))


def phases(kernels: pd.DataFrame) -> np.ndarray:
    """Each row's phase, prefill or decode (nsroof.costs.phases; '' when not a generation run)."""
    from nsroof.costs.phases import phases as of_rows

    return of_rows(_text(kernels, "op"), _text(kernels, "input_shapes"), _text(kernels, "nvtx_path"),
                   _col(kernels, "start_us").astype("float64").to_numpy())


def _row_columns(kernels: pd.DataFrame, q: pd.DataFrame, roofs: Roofs,
                 levels: Sequence[str]) -> dict[str, object]:
    """The per-kernel columns of the report (identity, duration, FLOPs, compute roof), repeated once per
    level: kernel-major rows."""
    n, L = len(kernels), len(levels)

    def per_kernel(values: object) -> np.ndarray:
        # one level: the kernel's own array (the report frame is built from copies:
        # pandas copies a dict's data)
        return np.asarray(values) if L == 1 else np.repeat(np.asarray(values), L)

    def text(name: str) -> np.ndarray:
        return _text(kernels, name)

    def ints(name: str) -> pd.arrays.IntegerArray:
        if name not in kernels:
            return all_missing(n * L)
        values = kernels[name].array  # an Int64 column as it is (pd.array would copy it first)
        return (values if isinstance(values.dtype, pd.Int64Dtype) else pd.array(values, dtype="Int64")).take(
            np.repeat(np.arange(n), L))

    return {
        "source": per_kernel(text("source")),
        "kernel_id": pd.array(kernels["kernel_id"] if "kernel_id" in kernels else np.arange(n),
                              dtype="Int64").take(np.repeat(np.arange(n), L)),
        "launches": (ints("launches") if "launches" in kernels
                     else pd.array(np.ones(n * L, dtype=np.int64), dtype="Int64")),
        "kind": per_kernel(np.where(text("kind") == "", "kernel", text("kind"))),  # ncu exports: kernels only
        **{name: per_kernel(text(name))
           for name in ("kernel_name", "function", "op", "input_shapes", "module")},
        "device": per_kernel(roofs.devices),
        "device_id": ints("device_id"),
        "cc": per_kernel(text("cc")),
        "host": per_kernel(text("host")),
        "process_id": ints("process_id"),
        "grid": per_kernel(text("grid")),
        "block": per_kernel(text("block")),
        "stream": ints("stream"),
        "nvtx_path": per_kernel(text("nvtx_path")),
        "category": per_kernel(categories(kernels)),
        "phase": per_kernel(phases(kernels)),
        "step": _steps(kernels, L),
        "start_us": per_kernel(_col(kernels, "start_us").astype("float64").to_numpy()),
        "duration_s": per_kernel(_col(q, "duration_s").astype("float64").to_numpy()),
        "duration_source": per_kernel(_text(q, "duration_source")),
        "flops": per_kernel(_col(q, "flops").astype("float64").to_numpy()),
        **{f"flops_{p}": per_kernel(_col(q, f"flops_{p}").astype("float64").to_numpy()) for p in PRECISIONS},
        "flops_source": per_kernel(_text(q, "flops_source")),
        "precision": per_kernel(roofs.precision.to_numpy(dtype=object)),
        "peak_flop_per_s": per_kernel(roofs.peak),
        "level": np.tile(np.array(list(levels), dtype=object), n),
    }

def _level_columns(q: pd.DataFrame, roofs: Roofs, levels: Sequence[str]) -> dict[str, object]:
    """The per-level columns (bytes, bandwidth roof, ceiling source, missing) as (n, L) arrays raveled
    kernel-major."""
    n, L = len(q), len(levels)
    bytes_ = np.empty((n, L))
    bytes_source = np.empty((n, L), dtype=object)
    bandwidth = np.empty((n, L))
    ceiling = np.empty((n, L), dtype=object)
    missing = np.empty((n, L), dtype=object)
    missing_common = [_text(q, "missing_duration"), _text(q, "missing_flops")]
    peak_reason = roofs.peak_reason
    # the per-level texts below depend on these per-kernel ones too: keyed once for all levels
    peak_key, _ = row_codes(roofs.peak_src)
    common_key, _ = row_codes(peak_reason, *missing_common)
    for j, level in enumerate(levels):
        bw, bw_src = roofs.bandwidth[level], roofs.bandwidth_src[level]
        bytes_[:, j] = _col(q, f"bytes_{level}").astype("float64").to_numpy()
        bytes_source[:, j] = _text(q, f"bytes_source_{level}")
        bandwidth[:, j] = bw
        ceiling[:, j] = spread(_ceiling_source, *row_codes(peak_key, bw_src), roofs.peak_src, bw_src)
        generic = f"bandwidth_bytes_per_s[{level}] (no ncu peak metric or machine figure)"
        # the machine's own reason where it has a figure of another counter of the level, else the generic one
        bw_reason = roofs.bandwidth_reason.get(level, np.full(n, "", dtype=object))
        no_bw, missing_level = np.isnan(bw), _text(q, f"missing_{level}")
        missing[:, j] = spread(
            # what blocks first
            lambda pr, nb, why, md, mf, ml, g=generic: _join(pr, (why or g) if nb else "", md, mf, ml),
            *row_codes(common_key, no_bw, bw_reason, missing_level), peak_reason, no_bw, bw_reason,
            *missing_common, missing_level)
    return {"bytes": bytes_.ravel(), "bytes_source": bytes_source.ravel(),
            "bandwidth_bytes_per_s": bandwidth.ravel(),
            "ceiling_source": ceiling.ravel(), "missing": missing.ravel(),
            # read by _classified for above_roof_cause, not report columns
            "l2_cache_bytes": np.repeat(roofs.l2_cache_bytes, L),
            "l3_cache_bytes": np.repeat(roofs.l3_cache_bytes, L), "cpu_roofs": np.repeat(roofs.cpu, L)}


def _link_rows(columns: dict[str, object], q: pd.DataFrame, roofs: Roofs, levels: Sequence[str]) -> None:
    """A collective costed by its formula (the quantities' bytes_link) is judged against the interconnect: its
    dram row becomes its link row — level 'link', bytes = its bus bytes, bandwidth = the GPU's interconnect
    per direction (Roofs.link_bandwidth, from the datasheet), so its time floor is bus bytes / link bandwidth.
    Without a known interconnect the bandwidth is NaN and `missing` says why: never the DRAM roof. A kernel
    with DRAM bytes of its own (counters) keeps its dram row."""
    if "dram" not in levels or "bytes_link" not in q.columns:
        return
    link_bytes = _col(q, "bytes_link").astype("float64").to_numpy()
    kernels = np.flatnonzero(~np.isnan(link_bytes)
                             & np.isnan(_col(q, "bytes_dram").astype("float64").to_numpy()))
    if not kernels.size:
        return
    rows = kernels * len(levels) + list(levels).index("dram")
    for name in ("level", "bytes", "bytes_source", "bandwidth_bytes_per_s", "ceiling_source", "missing"):
        columns[name] = np.asarray(columns[name]).copy()
    bandwidth, reason = roofs.link_bandwidth[kernels], roofs.link_reason[kernels]
    np.asarray(columns["level"])[rows] = LINK_LEVEL
    np.asarray(columns["bytes"])[rows] = link_bytes[kernels]
    np.asarray(columns["bytes_source"])[rows] = _text(q, "bytes_source_link")[kernels]
    np.asarray(columns["bandwidth_bytes_per_s"])[rows] = bandwidth
    np.asarray(columns["ceiling_source"])[rows] = [
        f"compute={p or 'unknown'}; memory={s or 'unknown'}"
        for p, s in zip(roofs.peak_src[kernels], roofs.link_src[kernels], strict=True)]
    np.asarray(columns["missing"])[rows] = [
        _join(pr, why, md, mf) for pr, why, md, mf in zip(roofs.peak_reason[kernels], reason,
                                                           _text(q, "missing_duration")[kernels],
                                                           _text(q, "missing_flops")[kernels], strict=True)]


def _analytic_ledger(report: pd.DataFrame, labels: np.ndarray, levels: Sequence[str]) -> pd.DataFrame:
    """For rows costed by an analytic formula (the quantities' ledger_label), the ledger side of the report:
    the formula (ledger_op), the FLOPs and compulsory bytes it says (expected_flops, min_bytes), the ideal
    time against the roofs (ideal_time_s = the dram row's time floor) and headroom = duration_s /
    ideal_time_s."""
    costed = (np.repeat(labels, len(levels)) != "") & np.isin(report["level"].to_numpy(dtype=object),
                                                              ("dram", LINK_LEVEL))
    if not costed.any():
        return report
    label = np.repeat(labels, len(levels))
    report["ledger_op"] = pd.Series(np.where(costed, label, report["ledger_op"].to_numpy(dtype=object)),
                                    index=report.index, dtype=object)
    for column, value in (("expected_flops", "flops"), ("min_bytes", "bytes"),
                          ("ideal_time_s", "time_floor_s")):
        report[column] = np.where(costed, report[value].to_numpy(dtype="float64"),
                                  report[column].to_numpy(dtype="float64"))
    ideal = report["ideal_time_s"].to_numpy(dtype="float64")
    with np.errstate(divide="ignore", invalid="ignore"):
        headroom = np.where(costed & (ideal > 0), report["duration_s"].to_numpy(dtype="float64") / ideal,
                            np.nan)
    report["headroom"] = np.where(costed, headroom, report["headroom"].to_numpy(dtype="float64"))
    return report


def _ceiling_source(peak_src: str, bw_src: str) -> str:
    if not peak_src and not bw_src:
        return "unknown"
    # both roofs from the same machine profile: name the profile once, and the memory roof's key when it is
    # the figure of one counter (the L2 tag stage's, not the level's plain figure)
    if (peak_src.split("#")[0] == bw_src.split("#")[0]
            and peak_src.startswith(("spec:", "measured:", "file:"))):
        key = bw_src.partition("#")[2]
        return peak_src.split("#")[0] + (f"#{key}" if key.startswith("counter_") else "")
    return f"compute={peak_src or 'unknown'}; memory={bw_src or 'unknown'}"


def _classified(columns: dict[str, object], index: pd.Index) -> pd.DataFrame:
    """The derived columns (intensity, bound, roof fraction, …) from flops, bytes, duration and the roofs,
    over columns not yet in a frame: the report frame is built once, in schema order."""

    def num(name: str) -> np.ndarray:
        return np.asarray(columns[name], dtype=float)

    w, qb, d = num("flops"), num("bytes"), num("duration_s")
    p, b = num("peak_flop_per_s"), num("bandwidth_bytes_per_s")
    i = roofline.intensity(w, qb)
    rg = roofline.ridge(p, b)
    att = roofline.attainable_flop_per_s(i, p, b)
    ach_f = roofline.rate(w, d)
    ach_b = roofline.rate(qb, d)
    derived: dict[str, object] = {
        "intensity": i,
        "ridge": rg,
        "attainable_flop_per_s": att,
        "achieved_flop_per_s": ach_f,
        "achieved_bytes_per_s": ach_b,
        "bound": pd.Series(roofline.bound(i, rg), index=index),  # inferred: pandas' string dtype
        "time_floor_s": roofline.time_floor_s(w, qb, p, b),
        "roof_fraction": roofline.roof_fraction(w, ach_f, att, ach_b, b),
        "above_roof": roofline.above_roof(ach_f, p, ach_b, b),
    }
    derived["above_roof_cause"] = _above_roof_causes(derived["above_roof"], ach_f, p, columns, qb, index)
    with np.errstate(divide="ignore", invalid="ignore"):
        memory_s, compute_s = qb / b, w / p
    # kernels told apart by their kernel_id's codes (an Int64 array as objects cost a hash of every boxed int)
    kernel_ids = pd.factorize(pd.array(columns["kernel_id"], dtype="Int64"))[0]
    derived["limiting"] = pd.Series(limiting(np.asarray(columns["source"], dtype=object), kernel_ids,
                                             memory_s, compute_s, np.asarray(columns["level"], dtype=object)),
                                    index=index, dtype=object)
    n = len(index)

    def column(name: str) -> object:
        value = derived[name] if name in derived else columns[name] if name in columns else _empty(name, n)
        # object arrays stay object (no per-column string-dtype inference); Parquet stores them as strings
        # (the arrays are this function's own: wrapped without a copy; the frame below makes its own)
        return pd.Series(value, index=index, dtype=object, copy=False) \
            if isinstance(value, np.ndarray) and value.dtype == object else value

    return pd.DataFrame({name: column(name) for name in COLUMNS}, index=index)


def _steps(kernels: pd.DataFrame, repeats: int) -> pd.arrays.IntegerArray:
    """Per kernel, the step it ran in (nsroof.names.nvtx_paths.steps), each row `repeats` times:
    worked out once per distinct (NVTX path, marked step) — thousands of launches share a few paths."""
    from nsroof.names.nvtx_paths import steps

    n = len(kernels)
    paths = (kernels["nvtx_path"].to_numpy(dtype=object) if "nvtx_path" in kernels
             else np.full(n, "", dtype=object))
    marked = kernels["step"].to_numpy(dtype=object) if "step" in kernels else None
    codes, first = row_codes(paths) if marked is None else row_codes(paths, marked)
    distinct = steps(None if marked is None else marked[first], paths[first])
    return distinct.take(np.repeat(codes, repeats))


def _above_roof_causes(above: object, ach_f: np.ndarray, p: np.ndarray, columns: dict[str, object],
                       qb: np.ndarray, index: pd.Index) -> pd.Series:
    """Per above-roof row, its likely cause (roofline.above_roof_cause); '' elsewhere."""
    flag = np.asarray(above, dtype=bool)
    out = np.full(len(index), "", dtype=object)
    rows = np.flatnonzero(flag)
    if rows.size:
        levels = np.asarray(columns["level"], dtype=object)
        l2, l3 = (np.asarray(columns.get(f"{lv}_cache_bytes", np.full(len(index), np.nan)), dtype=float)
                  for lv in ("l2", "l3"))
        cpu = np.asarray(columns.get("cpu_roofs", np.zeros(len(index), dtype=bool)), dtype=bool)
        with np.errstate(invalid="ignore"):
            flops_above = ach_f > (1 + roofline.ABOVE_ROOF_TOLERANCE) * p
        out[rows] = map_rows(roofline.above_roof_cause, levels[rows], qb[rows], l2[rows], flops_above[rows],
                             l3[rows], cpu[rows])
    return pd.Series(out, index=index, dtype=object)


def _empty(name: str, n: int) -> object:
    t = str(FIELD_BY_NAME[name].type)
    if t == "double":
        return np.full(n, np.nan)
    if t == "int64":
        return pd.array([pd.NA] * n, dtype="Int64")
    if t == "bool":
        return np.zeros(n, dtype=bool)
    return [""] * n


def limiting(source: np.ndarray, kernel_id: np.ndarray, memory_s: np.ndarray, compute_s: np.ndarray,
              levels: np.ndarray) -> np.ndarray:
    """Per report row, what sets its kernel's time floor: the level whose bytes / bandwidth is largest, or
    'compute' when flops / peak is at least every level's memory time; '' unless all are known. Rows of
    one kernel share (source, kernel_id), in any order."""
    n = len(levels)
    if n == 0:
        return np.empty(0, dtype=object)
    group, _ = row_codes(source, kernel_id)
    groups = int(group.max()) + 1
    # Only a kernel whose every level and compute floor are known names one: an unknown level's floor
    # could be the largest, and nsroof does not guess.
    unknown = np.zeros(groups, dtype=bool)
    np.logical_or.at(unknown, group, np.isnan(memory_s) | np.isnan(compute_s))
    worst_memory = np.full(groups, -np.inf)
    np.maximum.at(worst_memory, group, np.where(np.isnan(memory_s), -np.inf, memory_s))
    worst_compute = np.full(groups, -np.inf)
    np.maximum.at(worst_compute, group, np.where(np.isnan(compute_s), -np.inf, compute_s))
    # the worst level: the first row (in report order) of its kernel whose memory time is the worst
    first_worst = np.full(groups, n)
    np.minimum.at(first_worst, group, np.where(memory_s == worst_memory[group], np.arange(n), n))
    named = np.where(worst_compute >= worst_memory, "compute",
                     levels[np.minimum(first_worst, n - 1)]).astype(object)
    named[unknown] = ""
    return named[group]
