"""Build the report: one row per (kernel, memory level), classified against its roofs.

Inputs are the normalized kernel table (nsroof.importers.kernel_table) and the per-kernel
quantities (nsroof.models.quantities.derive contract). Roofs come, per kernel and per quantity,
from the export itself when it holds them (ceiling_source 'ncu:…'), else from the machine given
with --machine, else from the datasheet entry matched from the device name ('spec:<name>').
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
import pandas as pd

from nsroof._distinct import map_rows, row_codes, spread
from nsroof.models import roofline
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


def default_resolver(machine: Machine | None) -> MachineResolver:
    """--machine wins for every kernel; otherwise match each device name in the datasheet table."""
    if machine is not None:
        return lambda _device: machine

    from nsroof.models import machines

    cache: dict[str, Machine | None] = {}

    def resolve(device: str) -> Machine | None:
        if device not in cache:
            cache[device] = machines.lookup_device(device) if device else None
        return cache[device]

    return resolve


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
    resolve = resolver or default_resolver(machine)
    n = len(kernels)

    devices = kernels["device"].fillna("").astype(str) if "device" in kernels else pd.Series([""] * n)
    # resolve each distinct device once; per-kernel arrays come from integer codes
    dev_codes, dev_uniques = pd.factorize(devices, sort=False)
    dev_machines = [resolve(str(d)) for d in dev_uniques]

    precision = dominant_precision(q)
    tensor_dtypes = _tensor_dtypes(q)
    # A kernel without FLOPs is placed under the fp32 roof: its intensity is 0 whatever the roof.
    roof_precision = precision.where(precision != "", "fp32").to_numpy(dtype=object)

    peak = np.full(n, np.nan)
    peak_src = np.full(n, "", dtype=object)
    cache: dict[tuple[int, str], tuple[float, str]] = {}
    for p in PRECISIONS:
        rows = roof_precision == p
        if not rows.any():
            continue
        ncu_value = _col(q, f"peak_flop_per_s_{p}").astype("float64").to_numpy()
        ncu_src = _col(q, f"ceiling_source_{p}", "").fillna("").astype(str).to_numpy(dtype=object)
        from_ncu = rows & ~np.isnan(ncu_value)
        peak[from_ncu] = ncu_value[from_ncu]
        peak_src[from_ncu] = np.where(ncu_src[from_ncu] == "", "ncu", ncu_src[from_ncu])
        # machine roofs per (device, roof key): for tensor FLOPs the key is the dominant path's dtype
        keys = np.full(n, p, dtype=object)
        if p == "tensor":
            keys = np.array([f"tensor:{d}" if d else "tensor:?" for d in tensor_dtypes], dtype=object)
        from_spec = np.flatnonzero(rows & np.isnan(ncu_value))
        if from_spec.size:
            found = map_rows(lambda c, key: _spec_peak(dev_machines[c], key, cache), dev_codes[from_spec],
                             keys[from_spec])
            peak[from_spec] = [value for value, _ in found]
            peak_src[from_spec] = [source for _, source in found]

    L = len(levels)

    def per_kernel(values: object) -> np.ndarray:
        """Repeat a per-kernel array once per level: kernel-major rows."""
        return np.repeat(np.asarray(values), L)

    def text(name: str) -> np.ndarray:
        return _text(kernels, name)

    def ints(name: str) -> pd.arrays.IntegerArray:
        if name not in kernels:
            return pd.array(np.full(n * L, pd.NA), dtype="Int64")
        return pd.array(kernels[name], dtype="Int64").take(np.repeat(np.arange(n), L))

    columns: dict[str, object] = {
        "source": per_kernel(text("source")),
        "kernel_id": pd.array(kernels["kernel_id"] if "kernel_id" in kernels else np.arange(n),
                              dtype="Int64").take(np.repeat(np.arange(n), L)),
        "launches": ints("launches") if "launches" in kernels else pd.array(np.ones(n * L, dtype=np.int64), dtype="Int64"),
        **{name: per_kernel(text(name)) for name in ("kernel_name", "function", "op", "input_shapes", "module")},
        "device": per_kernel(devices.to_numpy(dtype=object)),
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
        "precision": per_kernel(precision.to_numpy(dtype=object)),
        "peak_flop_per_s": per_kernel(peak),
        "level": np.tile(np.array(list(levels), dtype=object), n),
    }

    # per-level columns as (n, L) arrays, raveled kernel-major
    bytes_ = np.empty((n, L))
    bytes_source = np.empty((n, L), dtype=object)
    bandwidth = np.empty((n, L))
    ceiling = np.empty((n, L), dtype=object)
    missing = np.empty((n, L), dtype=object)
    missing_common = [_text(q, "missing_duration"), _text(q, "missing_flops")]
    no_peak = np.isnan(peak)
    peak_reason = np.full(n, "", dtype=object)
    unroofed = np.flatnonzero(no_peak)
    if unroofed.size:
        peak_reason[unroofed] = map_rows(
            lambda p, d, c, tm, td: _peak_reason(p, d, dev_machines[c], tm, td), roof_precision[unroofed],
            devices.to_numpy(dtype=object)[unroofed], dev_codes[unroofed], _text(q, "tensor_metric")[unroofed],
            tensor_dtypes[unroofed])
    # the per-level texts below depend on these per-kernel ones too: keyed once for all levels
    peak_key, _ = row_codes(peak_src)
    common_key, _ = row_codes(peak_reason, *missing_common)
    for j, level in enumerate(levels):
        bw = _col(q, f"bandwidth_bytes_per_s_{level}").astype("float64").to_numpy().copy()
        bw_src = _text(q, f"ceiling_source_{level}").copy()
        if n:
            spec = [_machine_bandwidth(m, level) for m in dev_machines]
            spec_bw = np.array([v for v, _ in spec], dtype=float)[dev_codes]
            spec_src = np.array([s_ for _, s_ in spec], dtype=object)[dev_codes]
            from_spec = np.isnan(bw)
            bw[from_spec] = spec_bw[from_spec]
            bw_src[from_spec] = spec_src[from_spec]
            bw_src[~from_spec & (bw_src == "")] = "ncu"
        bytes_[:, j] = _col(q, f"bytes_{level}").astype("float64").to_numpy()
        bytes_source[:, j] = _text(q, f"bytes_source_{level}")
        bandwidth[:, j] = bw
        ceiling[:, j] = spread(_ceiling_source, *row_codes(peak_key, bw_src), peak_src, bw_src)
        bw_reason = f"bandwidth_bytes_per_s[{level}] (no ncu peak metric or machine figure)"
        no_bw, missing_level = np.isnan(bw), _text(q, f"missing_{level}")
        missing[:, j] = spread(
            lambda pr, nb, md, mf, ml, why=bw_reason: _join(pr, why if nb else "", md, mf, ml),  # what blocks first
            *row_codes(common_key, no_bw, missing_level), peak_reason, no_bw, *missing_common, missing_level)
    columns.update({
        "bytes": bytes_.ravel(), "bytes_source": bytes_source.ravel(), "bandwidth_bytes_per_s": bandwidth.ravel(),
        "ceiling_source": ceiling.ravel(), "missing": missing.ravel(),
    })
    return _classified(columns, pd.RangeIndex(n * L))


def _tensor_dtypes(q: pd.DataFrame) -> np.ndarray:
    """Per kernel, the dtype of its tensor roof (None: no single one): stated by an analytic source
    (`tensor_dtype`, e.g. a bf16 matmul), else read from the dominant sm__ops_path_tensor_* metric
    (`tensor_metric`)."""
    return map_rows(lambda stated, metric: stated or tensor_dtype(metric), _text(q, "tensor_dtype"),
                    _text(q, "tensor_metric"))


def _peak_reason(precision: str, device: str, machine: Machine | None, tensor_metric: str,
                 dtype: str | None) -> str:
    if machine is None:
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


def classify(report: pd.DataFrame) -> pd.DataFrame:
    """Fill the derived columns from flops, bytes, duration and the roofs. Pure: recomputes from scratch,
    so it also serves after aggregation or a join."""
    return _classified({str(c): report[c] for c in report.columns}, report.index)


def _classified(columns: dict[str, object], index: pd.Index) -> pd.DataFrame:
    """classify() over columns not yet in a frame: the report frame is built once, in schema order."""

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
    derived["limiting"] = pd.Series(_limiting(np.asarray(columns["source"], dtype=object),
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


def limiting_level(report: pd.DataFrame) -> pd.Series:
    """Per kernel, what sets its time floor: the level whose bytes / bandwidth is largest, or
    'compute' when flops / peak is at least every level's memory time; '' unless all are known."""
    with np.errstate(divide="ignore", invalid="ignore"):
        memory_s = report["bytes"].to_numpy(float) / report["bandwidth_bytes_per_s"].to_numpy(float)
        compute_s = report["flops"].to_numpy(float) / report["peak_flop_per_s"].to_numpy(float)
    named = _limiting(report["source"].to_numpy(dtype=object), report["kernel_id"].to_numpy(dtype=object), memory_s,
                      compute_s, report["level"].to_numpy(dtype=object))
    return pd.Series(named, index=report.index, dtype=object)


def _limiting(source: np.ndarray, kernel_id: np.ndarray, memory_s: np.ndarray, compute_s: np.ndarray,
              levels: np.ndarray) -> np.ndarray:
    """limiting_level over arrays: rows of one kernel share (source, kernel_id), in any order."""
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
