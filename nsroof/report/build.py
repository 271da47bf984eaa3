"""Build the report: one row per (kernel, memory level), classified against its roofs.

Inputs are the normalized kernel table (nsroof.importers.kernel_table) and the per-kernel
quantities (nsroof.models.quantities.derive contract). Roofs come, per kernel and per quantity,
from the export itself when it holds them (ceiling_source 'ncu:…'), else from the datasheet entry
matched from the device name ('spec:<name>'). A machine given with --machine is a what-if: its
figures replace the export's for every roof it has. Datasheet figures are taken at the clocks the
export recorded (models.machines.Machine.at_clocks: 'spec:<name> @ 765 MHz SM'), at boost otherwise.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
import pandas as pd

from nsroof._distinct import map_rows, row_codes, spread
from nsroof.models import machines, roofline
from nsroof.models import metric_formulas as mf
from nsroof.models.machines import Machine
from nsroof.schema import COLUMNS, FIELD_BY_NAME, LEVELS, PRECISIONS

# Machine-table key giving the roof of each report precision, in order of preference. FLOPs that
# ncu counts from SASS FADD/FMUL/FFMA run on CUDA cores, so their roof is the SIMT rate. Tensor
# FLOPs are compared with the dense tensor rate of the dtype of the kernel's dominant tensor path
# (`tensor_metric` from the quantities, see TENSOR_DTYPES); no path named, no machine roof.
PEAK_KEYS: dict[str, tuple[tuple[str, str], ...]] = {
    "fp64": (("simt_flop_per_s", "fp64"), ("peak_flop_per_s", "fp64")),
    "fp32": (("simt_flop_per_s", "fp32"), ("peak_flop_per_s", "fp32")),
    "fp16": (("simt_flop_per_s", "fp16"),),
}

# sm__ops_path_tensor_<X> source type -> the machine table's dense peak key. Checked in order: the
# first fragment found in the source type wins ("fp64" before "fp6"; fp4_fp6_fp8 paths mix dtypes:
# no single roof).
TENSOR_DTYPES: tuple[tuple[str, str | None], ...] = (
    ("fp64", "fp64"), ("fp4", None), ("fp6", None), ("int4", None), ("int1", None), ("tf32", "tf32"), ("bf16", "bf16"), ("fp16", "fp16"), ("fp8", "fp8"), ("int8", "int8"),
)


def tensor_dtype(metric: str) -> str | None:
    """The dtype whose dense tensor peak is the roof for FLOPs counted by `metric` (None: no single one)."""
    source = metric.split("_src_", 1)[1] if "_src_" in metric else ""
    source = source.split("_dst_", 1)[0]
    for fragment, dtype in TENSOR_DTYPES:
        if fragment in source:
            return dtype
    return None

MachineResolver = Callable[[str], "Machine | None"]
CLOCK_UNITS: tuple[str, ...] = ("sm", "dram", "l2", "l1")


def _machines_at_clocks(q: pd.DataFrame, dev_codes: np.ndarray, dev_machines: list[Machine | None]
                        ) -> tuple[np.ndarray, list[Machine | None]]:
    """Per kernel, an index into machines evaluated at the clocks that kernel's export recorded
    (rounded to 1 MHz, so one machine serves all launches at one clock)."""
    clocks = [np.round(_col(q, f"clock_hz_{u}").astype("float64").to_numpy() / 1e6) * 1e6 for u in CLOCK_UNITS]
    if not len(dev_codes):
        return np.zeros(0, dtype=np.int64), []
    codes, first = row_codes(np.asarray(dev_codes), *clocks)
    out: list[Machine | None] = []
    for i in first.tolist():
        m = dev_machines[dev_codes[i]]
        at = {f"{u}_hz": float(c[i]) for u, c in zip(CLOCK_UNITS, clocks, strict=True)}
        out.append(None if m is None else m.at_clocks(**at))
    return codes, out


def _tensor_estimates(q: pd.DataFrame, cc: np.ndarray, codes: np.ndarray, kernel_machines: list[Machine | None]
                      ) -> pd.DataFrame:
    """Tensor FLOPs estimated from the pipe-instruction count, re-priced per kernel: the largest MMA shape
    of its CC that keeps the estimate within the dense FP16 tensor roof at the profiled clock (and within
    tensor-pipe active cycles × the per-SM-cycle peak when collected). Above the roof at every shape: the
    smallest shape, and the source says the estimate is above the roof."""
    inst = _col(q, "tensor_inst").astype("float64").to_numpy()
    rows = np.flatnonzero(~np.isnan(inst) & (inst > 0))
    if not rows.size:
        return q
    q = q.copy()
    duration = _col(q, "duration_s").astype("float64").to_numpy()
    active = _col(q, "tensor_cycles_active").astype("float64").to_numpy()
    flops_tensor = q["flops_tensor"].astype("float64").to_numpy().copy()
    total = q["flops"].astype("float64").to_numpy().copy()
    source_t = _text(q, "flops_source_tensor").copy()
    source = _text(q, "flops_source").copy()
    dtype = mf.TENSOR_ESTIMATE_DTYPE
    for i in rows.tolist():
        shapes = mf.TENSOR_SHAPES_BY_CC.get(mf.normalize_cc(cc[i]))
        if not shapes:
            continue
        m = kernel_machines[codes[i]]
        roof = m.peak_flop_per_s.get(dtype, np.nan) if m is not None else np.nan
        limit = roof * duration[i] * (1 + roofline.ABOVE_ROOF_TOLERANCE)
        bound = f"the {dtype} tensor roof of {m.label}" if m is not None else ""
        per_cycle = m.flop_per_cycle_per_sm("peak_flop_per_s", dtype) if m is not None else np.nan
        if active[i] > 0 and per_cycle > 0:
            limit = np.fmin(limit, active[i] * per_cycle * (1 + roofline.ABOVE_ROOF_TOLERANCE))
            bound += " and the tensor pipe's active cycles"
        metric = source_t[i].split(" × ")[0]
        if not limit == limit:  # no roof: the default (largest) shape, said to be unchecked
            name, factor = shapes[0]
            why = f"{name}, the largest shape at CC {cc[i]}; no roof to check it against"
        else:
            fits = [(nm, f) for nm, f in shapes if inst[i] * f <= limit]
            name, factor = fits[0] if fits else shapes[-1]
            why = (f"{name}, the largest shape at CC {cc[i]} within {bound}" if fits else
                   f"{name}, the smallest shape at CC {cc[i]}: above {bound} even so (check the instruction count)")
        new_source = f"{metric} × {factor:g} (estimate: {why})"
        value = inst[i] * factor
        if total[i] == total[i]:
            total[i] += value - flops_tensor[i]
        source[i] = source[i].replace(f"tensor: {source_t[i]}", f"tensor: {new_source}")
        flops_tensor[i], source_t[i] = value, new_source
    q["flops_tensor"], q["flops"] = flops_tensor, total
    q["flops_source_tensor"] = pd.Series(source_t, index=q.index, dtype=object)
    q["flops_source"] = pd.Series(source, index=q.index, dtype=object)
    return q


def has_ncu_ceilings(quantities: pd.DataFrame) -> bool:
    """Whether the export carried any ncu ceiling (a --machine then overrides it: a what-if)."""
    cols = [c for c in quantities.columns if str(c).startswith(("peak_flop_per_s_", "bandwidth_bytes_per_s_"))]
    return bool(cols) and bool(quantities[cols].notna().to_numpy().any())


def _machine_peak(m: Machine | None, precision: str) -> tuple[float, str]:
    if m is None:
        return np.nan, ""
    keys = PEAK_KEYS.get(precision, ())
    if precision.startswith("tensor:"):
        keys = (("peak_flop_per_s", precision.split(":", 1)[1]),)
    for table, key in keys:
        value = getattr(m, table).get(key)
        if value:
            return float(value), f"{m.label}#{table}.{key}"
    return np.nan, ""


def _spec_peak(m: Machine | None, key: str, cache: dict[tuple[int, str], tuple[float, str]]) -> tuple[float, str]:
    found = cache.get((id(m), key))
    if found is None:
        found = cache[(id(m), key)] = _machine_peak(m, key)
    return found


def _machine_bandwidth(m: Machine | None, level: str) -> tuple[float, str]:
    if m is None:
        return np.nan, ""
    value = m.bandwidth_bytes_per_s.get(level)
    if value:
        return float(value), f"{m.label}#bandwidth_bytes_per_s.{level}"
    return np.nan, ""


def dominant_precision(q: pd.DataFrame) -> pd.Series:
    """The precision carrying most FLOPs per kernel; '' when the kernel has no known FLOPs."""
    cols = [f"flops_{p}" for p in PRECISIONS]
    values = q.reindex(columns=cols).astype("float64").fillna(0.0).to_numpy()
    best = values.argmax(axis=1) if len(values) else np.array([], dtype=int)
    names = np.array(PRECISIONS, dtype=object)[best] if len(values) else np.array([], dtype=object)
    has_flops = values.max(axis=1) > 0 if len(values) else np.array([], dtype=bool)
    return pd.Series(np.where(has_flops, names, ""), index=q.index, dtype=object)


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


def _text(q: pd.DataFrame, name: str) -> np.ndarray:
    """A text column as an object array of str ('' for missing), without a round trip through
    pandas' string dtype (which converts to Arrow and back)."""
    if name not in q.columns:
        return np.full(len(q), "", dtype=object)
    column = q[name]
    if column.dtype == object:
        arr = column.to_numpy()
        # every cell a str (the common case): nothing to replace, and this test is ~8x cheaper than
        # the missing-value pass of to_numpy(na_value=...); callers copy before they write
        if pd.api.types.infer_dtype(arr, skipna=False) == "string":
            return arr
    arr = column.to_numpy(dtype=object, na_value="")
    if len(arr) and not isinstance(arr[0], str):
        arr = np.array([v if isinstance(v, str) else str(v) for v in arr], dtype=object)
    return arr


def _col(q: pd.DataFrame, name: str, default: object = np.nan) -> pd.Series:
    if name in q.columns:
        return q[name]
    return pd.Series([default] * len(q), index=q.index)


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
    q = quantities.reset_index(drop=True)
    resolve = resolver or machines.for_devices(machine)
    n = len(kernels)
    devices = kernels["device"].fillna("").astype(str) if "device" in kernels else pd.Series([""] * n)
    # resolve each distinct device once; per-kernel arrays come from integer codes
    dev_codes, dev_uniques = pd.factorize(devices, sort=False)
    dev_machines = [resolve(str(d)) for d in dev_uniques]
    # ... then each (device, recorded clocks) once: the datasheet figures at the profiled clock
    mach_codes, kernel_machines = _machines_at_clocks(q, dev_codes, dev_machines)
    q = _tensor_estimates(q, _text(kernels, "cc"), mach_codes, kernel_machines)
    roofs = _Roofs(q, devices.to_numpy(dtype=object), mach_codes, kernel_machines, what_if=machine is not None)
    columns = _row_columns(kernels, q, roofs, levels)
    columns.update(_level_columns(q, roofs, levels))
    return _analytic_ledger(_classified(columns, pd.RangeIndex(n * len(levels))), _text(q, "ledger_label"), levels)


class _Roofs:
    """Per kernel: its machine (at its clocks), dominant precision and compute roof with their sources."""

    def __init__(self, q: pd.DataFrame, devices: np.ndarray, mach_codes: np.ndarray,
                 kernel_machines: list[Machine | None], *, what_if: bool) -> None:
        self.devices, self.mach_codes, self.kernel_machines, self.what_if = devices, mach_codes, kernel_machines, what_if
        self.precision = dominant_precision(q)
        self.tensor_dtypes = _tensor_dtypes(q)
        # A kernel without FLOPs is placed under the fp32 roof: its intensity is 0 whatever the roof.
        self.roof_precision = self.precision.where(self.precision != "", "fp32").to_numpy(dtype=object)
        self.peak, self.peak_src = _peaks(q, self)


def _peaks(q: pd.DataFrame, r: _Roofs) -> tuple[np.ndarray, np.ndarray]:
    """The compute roof of each kernel's precision: the export's ncu figure, else (or with --machine) the
    machine's; for tensor FLOPs the key is the dominant path's dtype."""
    n = len(q)
    peak = np.full(n, np.nan)
    peak_src = np.full(n, "", dtype=object)
    cache: dict[tuple[int, str], tuple[float, str]] = {}
    for p in PRECISIONS:
        rows = r.roof_precision == p
        if not rows.any():
            continue
        ncu_value = _col(q, f"peak_flop_per_s_{p}").astype("float64").to_numpy()
        ncu_src = _col(q, f"ceiling_source_{p}", "").fillna("").astype(str).to_numpy(dtype=object)
        keys = np.full(n, p, dtype=object)
        if p == "tensor":
            keys = np.array([f"tensor:{d}" if d else "tensor:?" for d in r.tensor_dtypes], dtype=object)
        spec_value = np.full(n, np.nan)
        spec_src = np.full(n, "", dtype=object)
        wanted = np.flatnonzero(rows & (np.isnan(ncu_value) | r.what_if))
        if wanted.size:
            found = map_rows(lambda c, key: _spec_peak(r.kernel_machines[c], key, cache), r.mach_codes[wanted],
                             keys[wanted])
            spec_value[wanted] = [value for value, _ in found]
            spec_src[wanted] = [source for _, source in found]
        from_ncu = rows & ~np.isnan(ncu_value) & ~(r.what_if & ~np.isnan(spec_value))
        peak[from_ncu] = ncu_value[from_ncu]
        peak_src[from_ncu] = np.where(ncu_src[from_ncu] == "", "ncu", ncu_src[from_ncu])
        from_spec = rows & ~from_ncu
        peak[from_spec] = spec_value[from_spec]
        peak_src[from_spec] = spec_src[from_spec]
    return peak, peak_src


def _row_columns(kernels: pd.DataFrame, q: pd.DataFrame, roofs: _Roofs, levels: Sequence[str]) -> dict[str, object]:
    """The per-kernel columns of the report (identity, duration, FLOPs, compute roof), repeated once per level:
    kernel-major rows."""
    n, L = len(kernels), len(levels)

    def per_kernel(values: object) -> np.ndarray:
        return np.repeat(np.asarray(values), L)

    def text(name: str) -> np.ndarray:
        return _text(kernels, name)

    def ints(name: str) -> pd.arrays.IntegerArray:
        if name not in kernels:
            return pd.array(np.full(n * L, pd.NA), dtype="Int64")
        return pd.array(kernels[name], dtype="Int64").take(np.repeat(np.arange(n), L))

    return {
        "source": per_kernel(text("source")),
        "kernel_id": pd.array(kernels["kernel_id"] if "kernel_id" in kernels else np.arange(n),
                              dtype="Int64").take(np.repeat(np.arange(n), L)),
        "launches": ints("launches") if "launches" in kernels else pd.array(np.ones(n * L, dtype=np.int64), dtype="Int64"),
        "kind": per_kernel(np.where(text("kind") == "", "kernel", text("kind"))),  # ncu exports: kernels only
        **{name: per_kernel(text(name)) for name in ("kernel_name", "function", "op", "input_shapes", "module")},
        "device": per_kernel(roofs.devices),
        "cc": per_kernel(text("cc")),
        "host": per_kernel(text("host")),
        "process_id": ints("process_id"),
        "grid": per_kernel(text("grid")),
        "block": per_kernel(text("block")),
        "stream": ints("stream"),
        "nvtx_path": per_kernel(text("nvtx_path")),
        "duration_s": per_kernel(_col(q, "duration_s").astype("float64").to_numpy()),
        "duration_source": per_kernel(_text(q, "duration_source")),
        "flops": per_kernel(_col(q, "flops").astype("float64").to_numpy()),
        **{f"flops_{p}": per_kernel(_col(q, f"flops_{p}").astype("float64").to_numpy()) for p in PRECISIONS},
        "flops_source": per_kernel(_text(q, "flops_source")),
        "precision": per_kernel(roofs.precision.to_numpy(dtype=object)),
        "peak_flop_per_s": per_kernel(roofs.peak),
        "level": np.tile(np.array(list(levels), dtype=object), n),
    }


def _level_columns(q: pd.DataFrame, roofs: _Roofs, levels: Sequence[str]) -> dict[str, object]:
    """The per-level columns (bytes, bandwidth roof, ceiling source, missing) as (n, L) arrays raveled
    kernel-major."""
    n, L = len(q), len(levels)
    mach_codes, kernel_machines = roofs.mach_codes, roofs.kernel_machines
    bytes_ = np.empty((n, L))
    bytes_source = np.empty((n, L), dtype=object)
    bandwidth = np.empty((n, L))
    ceiling = np.empty((n, L), dtype=object)
    missing = np.empty((n, L), dtype=object)
    missing_common = [_text(q, "missing_duration"), _text(q, "missing_flops")]
    peak_reason = np.full(n, "", dtype=object)
    unroofed = np.flatnonzero(np.isnan(roofs.peak))
    if unroofed.size:
        peak_reason[unroofed] = map_rows(
            lambda p, d, c, tm, td: _peak_reason(p, d, kernel_machines[c], tm, td), roofs.roof_precision[unroofed],
            roofs.devices[unroofed], mach_codes[unroofed], _text(q, "tensor_metric")[unroofed],
            roofs.tensor_dtypes[unroofed])
    # the per-level texts below depend on these per-kernel ones too: keyed once for all levels
    peak_key, _ = row_codes(roofs.peak_src)
    common_key, _ = row_codes(peak_reason, *missing_common)
    for j, level in enumerate(levels):
        bw = _col(q, f"bandwidth_bytes_per_s_{level}").astype("float64").to_numpy().copy()
        bw_src = _text(q, f"ceiling_source_{level}").copy()
        if n:
            spec = [_machine_bandwidth(m, level) for m in kernel_machines]
            spec_bw = np.array([v for v, _ in spec], dtype=float)[mach_codes]
            spec_src = np.array([s_ for _, s_ in spec], dtype=object)[mach_codes]
            from_spec = np.isnan(bw) | (roofs.what_if & ~np.isnan(spec_bw))
            bw[from_spec] = spec_bw[from_spec]
            bw_src[from_spec] = spec_src[from_spec]
            bw_src[~from_spec & (bw_src == "")] = "ncu"
        bytes_[:, j] = _col(q, f"bytes_{level}").astype("float64").to_numpy()
        bytes_source[:, j] = _text(q, f"bytes_source_{level}")
        bandwidth[:, j] = bw
        ceiling[:, j] = spread(_ceiling_source, *row_codes(peak_key, bw_src), roofs.peak_src, bw_src)
        bw_reason = f"bandwidth_bytes_per_s[{level}] (no ncu peak metric or machine figure)"
        no_bw, missing_level = np.isnan(bw), _text(q, f"missing_{level}")
        missing[:, j] = spread(
            lambda pr, nb, md, mf, ml, why=bw_reason: _join(pr, why if nb else "", md, mf, ml),  # what blocks first
            *row_codes(common_key, no_bw, missing_level), peak_reason, no_bw, *missing_common, missing_level)
    return {"bytes": bytes_.ravel(), "bytes_source": bytes_source.ravel(), "bandwidth_bytes_per_s": bandwidth.ravel(),
            "ceiling_source": ceiling.ravel(), "missing": missing.ravel()}


def _analytic_ledger(report: pd.DataFrame, labels: np.ndarray, levels: Sequence[str]) -> pd.DataFrame:
    """For rows costed by an analytic formula (the quantities' ledger_label), the ledger side of the report:
    the formula (ledger_op), the FLOPs and compulsory bytes it says (expected_flops, min_bytes), the ideal
    time against the roofs (ideal_time_s = the dram row's time floor) and headroom = duration_s /
    ideal_time_s."""
    costed = (np.repeat(labels, len(levels)) != "") & (report["level"].to_numpy(dtype=object) == "dram")
    if not costed.any():
        return report
    label = np.repeat(labels, len(levels))
    report["ledger_op"] = pd.Series(np.where(costed, label, report["ledger_op"].to_numpy(dtype=object)),
                                    index=report.index, dtype=object)
    for column, value in (("expected_flops", "flops"), ("min_bytes", "bytes"), ("ideal_time_s", "time_floor_s")):
        report[column] = np.where(costed, report[value].to_numpy(dtype="float64"), report[column].to_numpy(dtype="float64"))
    ideal = report["ideal_time_s"].to_numpy(dtype="float64")
    with np.errstate(divide="ignore", invalid="ignore"):
        headroom = np.where(costed & (ideal > 0), report["duration_s"].to_numpy(dtype="float64") / ideal, np.nan)
    report["headroom"] = np.where(costed, headroom, report["headroom"].to_numpy(dtype="float64"))
    return report


def _tensor_dtypes(q: pd.DataFrame) -> np.ndarray:
    """Per kernel, the dtype of its tensor roof (None: no single one): stated by an analytic source
    (`tensor_dtype`, e.g. a bf16 matmul), else read from the dominant sm__ops_path_tensor_* metric
    (`tensor_metric`), else — for FLOPs estimated from the tensor-pipe count — the HMMA FP16 path."""
    estimated = ~np.isnan(_col(q, "tensor_inst").astype("float64").to_numpy())
    return map_rows(lambda stated, metric, est: stated or tensor_dtype(metric) or
                    (mf.TENSOR_ESTIMATE_DTYPE if est else None),
                    _text(q, "tensor_dtype"), _text(q, "tensor_metric"), estimated)


def _peak_reason(precision: str, device: str, machine: Machine | None, tensor_metric: str,
                 dtype: str | None) -> str:
    if machine is None:
        candidates = machines.device_candidates(device)
        if len(candidates) > 1:
            return (f"peak_flop_per_s[{precision}] (no ncu peak metric; device {device!r} fits several machine "
                    f"entries ({', '.join(m.name for m in candidates)}): pass --machine with one of them)")
        return (f"peak_flop_per_s[{precision}] (no ncu peak metric; device {device!r} not in the machine table: "
                "pass --machine)")
    if precision == "tensor":
        what = f"tensor {dtype}" if dtype else f"tensor path {tensor_metric or '(none named)'}"
        return f"peak_flop_per_s[{what}] (no ncu peak metric; {machine.label} has no dense figure for it)"
    return f"peak_flop_per_s[{precision}] (no ncu peak metric; {machine.label} has no figure for it)"


def _ceiling_source(peak_src: str, bw_src: str) -> str:
    if not peak_src and not bw_src:
        return "unknown"
    # both roofs from the same machine profile: name the profile once
    if peak_src.split("#")[0] == bw_src.split("#")[0] and peak_src.startswith(("spec:", "measured:", "file:")):
        return peak_src.split("#")[0]
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
    with np.errstate(divide="ignore", invalid="ignore"):
        memory_s, compute_s = qb / b, w / p
    derived["limiting"] = pd.Series(limiting(np.asarray(columns["source"], dtype=object),
                                              np.asarray(columns["kernel_id"], dtype=object), memory_s, compute_s,
                                              np.asarray(columns["level"], dtype=object)), index=index, dtype=object)
    n = len(index)

    def column(name: str) -> object:
        value = derived[name] if name in derived else columns[name] if name in columns else _empty(name, n)
        # object arrays stay object (no per-column string-dtype inference); Parquet stores them as strings
        return pd.Series(value, index=index, dtype=object) if isinstance(value, np.ndarray) and value.dtype == object \
            else value

    return pd.DataFrame({name: column(name) for name in COLUMNS}, index=index)


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
