"""Where every roof of the report comes from, in one place: per kernel, the compute roof of its precision
and the bandwidth of each memory level, each with its source, and — when absent — the reason.

Order of preference, per kernel and per quantity:
1. the export's own figure (ncu's peak metrics: ceiling_source 'ncu:…'), unless a --machine is given;
2. the machine: the --machine (a what-if: its figures replace the export's for every roof it has), else the
   datasheet entry matched from the device name (roofs.machines.lookup_device: 'spec:<name>'), taken at
   the clocks the export recorded (Machine.at_clocks: 'spec:<name> @ 765 MHz SM'), at boost otherwise;
3. none: NaN, and a reason naming the missing figure and how to supply it.
Tensor FLOPs estimated from the pipe-instruction count are re-priced here against the tensor roof.
roofs.classify classifies against these roofs; pipeline and roofs.ledger_join resolve machines through
`machine_of` / `machines_used`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from nsroof.counters import metric_formulas as mf
from nsroof.counters import tensor_paths as tp
from nsroof.frames.columns import texts
from nsroof.frames.distinct import map_rows, row_codes
from nsroof.roofs import machines, roofline
from nsroof.roofs.machines import Machine
from nsroof.schema import LEVELS, LINK_LEVEL, PRECISIONS

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
    ("fp64", "fp64"), ("fp4", None), ("fp6", None), ("int4", None), ("int1", None), ("tf32", "tf32"),
    ("bf16", "bf16"), ("fp16", "fp16"), ("fp8", "fp8"), ("int8", "int8"),
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
    clocks = [np.round(column(q, f"clock_hz_{u}").astype("float64").to_numpy() / 1e6) * 1e6
              for u in CLOCK_UNITS]
    if not len(dev_codes):
        return np.zeros(0, dtype=np.int64), []
    codes, first = row_codes(np.asarray(dev_codes), *clocks)
    out: list[Machine | None] = []
    for i in first.tolist():
        m = dev_machines[dev_codes[i]]
        at = {f"{u}_hz": float(c[i]) for u, c in zip(CLOCK_UNITS, clocks, strict=True)}
        out.append(None if m is None else m.at_clocks(**at))
    return codes, out


def _tensor_estimates(q: pd.DataFrame, cc: np.ndarray, codes: np.ndarray,
                      kernel_machines: list[Machine | None]) -> pd.DataFrame:
    """Tensor FLOPs estimated from the pipe-instruction count, re-priced per kernel: the largest MMA shape
    of its CC that keeps the estimate within the dense FP16 tensor roof at the profiled clock (and within
    tensor-pipe active cycles × the per-SM-cycle peak when collected). Above the roof at every shape: the
    smallest shape, and the source says the estimate is above the roof."""
    inst = column(q, "tensor_inst").astype("float64").to_numpy()
    rows = np.flatnonzero(~np.isnan(inst) & (inst > 0))
    if not rows.size:
        return q
    q = q.copy()
    duration = column(q, "duration_s").astype("float64").to_numpy()
    active = column(q, "tensor_cycles_active").astype("float64").to_numpy()
    flops_tensor = q["flops_tensor"].astype("float64").to_numpy().copy()
    total = q["flops"].astype("float64").to_numpy().copy()
    source_t = texts(q, "flops_source_tensor").copy()
    source = texts(q, "flops_source").copy()
    dtype, shapes_by_cc = tp.TENSOR_ESTIMATE_DTYPE, tp.tensor_shapes_by_cc()
    for i in rows.tolist():
        shapes = shapes_by_cc.get(tp.normalize_cc(cc[i]))
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
                   f"{name}, the smallest shape at CC {cc[i]}: above {bound} even so "
                   "(check the instruction count)")
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
    cols = [c for c in quantities.columns
            if str(c).startswith(("peak_flop_per_s_", "bandwidth_bytes_per_s_"))]
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


def _spec_peak(m: Machine | None, key: str,
               cache: dict[tuple[int, str], tuple[float, str]]) -> tuple[float, str]:
    found = cache.get((id(m), key))
    if found is None:
        found = cache[(id(m), key)] = _machine_peak(m, key)
    return found


def _machine_bandwidth(m: Machine | None, level: str, counter: str) -> tuple[float, str, str]:
    """The machine's roof of `level` for bytes of `counter` (Machine.level_bandwidth), its source, and —
    when the machine has a figure of the level but none for that counter — the reason."""
    if m is None:
        return np.nan, "", ""
    value, key, why = m.level_bandwidth(level, counter)
    if why:
        why = (f"bandwidth_bytes_per_s[{level}] (no ncu peak metric; {why}: collect "
               f"{mf.COUNTER_PEAKS.get(counter, 'its peak_sustained metric')}, or pass --machine a profile "
               f"with counter_bandwidth_bytes_per_s.{level}.{counter})")
    return value, (f"{m.label}#{key}" if key else ""), why


def dominant_precision(q: pd.DataFrame) -> pd.Series:
    """The precision carrying most FLOPs per kernel; '' when the kernel has no known FLOPs."""
    cols = [f"flops_{p}" for p in PRECISIONS]
    values = q.reindex(columns=cols).astype("float64").fillna(0.0).to_numpy()
    best = values.argmax(axis=1) if len(values) else np.array([], dtype=int)
    names = np.array(PRECISIONS, dtype=object)[best] if len(values) else np.array([], dtype=object)
    has_flops = values.max(axis=1) > 0 if len(values) else np.array([], dtype=bool)
    return pd.Series(np.where(has_flops, names, ""), index=q.index, dtype=object)



def column(q: pd.DataFrame, name: str, default: object = np.nan) -> pd.Series:
    if name in q.columns:
        return q[name]
    return pd.Series([default] * len(q), index=q.index)



@dataclass
class Roofs:
    """Per kernel: its machine (at its clocks), dominant precision and compute roof, and per level its
    bandwidth roof, each with its source; `peak_reason` says why a compute roof is absent. `quantities`
    are the input's, tensor estimates re-priced against these roofs."""

    quantities: pd.DataFrame
    devices: np.ndarray
    mach_codes: np.ndarray
    kernel_machines: list[Machine | None]
    what_if: bool
    precision: pd.Series
    tensor_dtypes: np.ndarray
    roof_precision: np.ndarray
    peak: np.ndarray = field(default_factory=lambda: np.zeros(0))
    peak_src: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=object))
    peak_reason: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=object))
    bandwidth: dict[str, np.ndarray] = field(default_factory=dict)
    bandwidth_src: dict[str, np.ndarray] = field(default_factory=dict)
    # why a level has no roof where the machine has one for another counter ('' otherwise)
    bandwidth_reason: dict[str, np.ndarray] = field(default_factory=dict)
    l2_cache_bytes: np.ndarray = field(default_factory=lambda: np.zeros(0))
    l3_cache_bytes: np.ndarray = field(default_factory=lambda: np.zeros(0))
    cpu: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=bool))  # judged against a CPU profile
    # the interconnect roof of a collective's bus bytes (level 'link'), per GPU per direction
    link_bandwidth: np.ndarray = field(default_factory=lambda: np.zeros(0))
    link_src: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=object))
    link_reason: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=object))


def resolve_roofs(kernels: pd.DataFrame, quantities: pd.DataFrame, machine: Machine | None = None, *,
                  levels: Sequence[str] = LEVELS, resolver: MachineResolver | None = None) -> Roofs:
    """Every roof of every kernel (see the module docstring for where each comes from). `kernels` and
    `quantities` describe the same rows (index reset); `machine` is the --machine what-if."""
    resolve = resolver or machines.for_devices(machine)
    n = len(kernels)
    devices = texts(kernels, "device")
    # resolve each distinct device once; per-kernel arrays come from integer codes
    dev_codes, dev_uniques = pd.factorize(devices, sort=False)
    dev_machines = [resolve(str(d)) for d in dev_uniques]
    # ... then each (device, recorded clocks) once: the datasheet figures at the profiled clock
    mach_codes, kernel_machines = _machines_at_clocks(quantities, dev_codes, dev_machines)
    q = _tensor_estimates(quantities, texts(kernels, "cc"), mach_codes, kernel_machines)
    precision = dominant_precision(q)
    # A kernel without FLOPs is placed under the fp32 roof: its intensity is 0 whatever the roof. FLOPs of no
    # precision (an op's formula priced without its dtype) stand under none: which roof is the dtype's.
    unplaced = column(q, "flops").astype("float64").to_numpy() > 0
    r = Roofs(q, devices, mach_codes, kernel_machines, machine is not None, precision,
              _tensor_dtypes(q),
              np.where(precision != "", precision, np.where(unplaced, "", "fp32")).astype(object))
    r.peak, r.peak_src = _peaks(q, r)
    r.peak_reason = _peak_reasons(q, r)
    for level in levels:
        r.bandwidth[level], r.bandwidth_src[level], r.bandwidth_reason[level] = _bandwidths(q, r, level)
    r.l2_cache_bytes = _per_kernel(kernel_machines, mach_codes, n, lambda m: m.cache_bytes.get("l2", np.nan))
    r.l3_cache_bytes = _per_kernel(kernel_machines, mach_codes, n, lambda m: m.cache_bytes.get("l3", np.nan))
    r.cpu = _per_kernel(kernel_machines, mach_codes, n, lambda m: float(m.kind == "cpu")) == 1.0
    r.link_bandwidth, r.link_src, r.link_reason = _link_roofs(r)
    return r


def _per_kernel(kernel_machines: list[Machine | None], mach_codes: np.ndarray, n: int,
                read: Callable[[Machine], float]) -> np.ndarray:
    """One figure of each kernel's machine (NaN without one), read once per machine."""
    if not n:
        return np.zeros(0)
    return np.array([read(m) if m is not None else np.nan for m in kernel_machines], dtype=float)[mach_codes]


def _link_roofs(r: Roofs) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per kernel, the interconnect bandwidth per GPU per direction of its machine (machines.interconnect: the
    datasheet's NVLink/NVSwitch figure), its source, and — when unknown — the reason; never a DRAM figure."""
    found = [_link_roof(m, d) for m, d in zip(r.kernel_machines, _first_devices(r), strict=True)]
    pick = r.mach_codes
    return (np.array([v for v, _, _ in found], dtype=float)[pick] if found else np.zeros(len(pick)),
            (np.array([s_ for _, s_, _ in found], dtype=object)[pick] if found
             else np.zeros(len(pick), dtype=object)),
            (np.array([w for _, _, w in found], dtype=object)[pick] if found
             else np.zeros(len(pick), dtype=object)))


def _first_devices(r: Roofs) -> list[str]:
    """The device name of each machine code's first kernel (for the reason when it has no machine)."""
    codes, rows = np.unique(r.mach_codes, return_index=True)  # each code's first kernel
    first = dict(zip(codes.tolist(), rows.tolist(), strict=True))
    return [str(r.devices[first[c]]) if c in first else "" for c in range(len(r.kernel_machines))]


def _link_roof(m: Machine | None, device: str) -> tuple[float, str, str]:
    what = f"bandwidth_bytes_per_s[{LINK_LEVEL}]"
    if m is None:
        return np.nan, "", (f"{what} (the GPU's interconnect: {machines.unknown_device(device)}: "
                            "pass --machine)")
    link = machines.interconnect(m.name)
    if link is None:
        return np.nan, "", (f"{what} (no interconnect figure for {m.name}: nsroof's table of NVLink/NVSwitch "
                            "bandwidths from the datasheets has none)")
    return (float(link["bandwidth_bytes_per_s"]),
            f"spec:{m.name}#interconnect ({link['link']}: {link['source']})", "")


def _peak_reasons(q: pd.DataFrame, r: Roofs) -> np.ndarray:
    reason = np.full(len(q), "", dtype=object)
    unroofed = np.flatnonzero(np.isnan(r.peak))
    if unroofed.size:
        reason[unroofed] = map_rows(
            lambda p, d, c, tm, td: _peak_reason(p, d, r.kernel_machines[c], tm, td),
            r.roof_precision[unroofed],
            r.devices[unroofed], r.mach_codes[unroofed], texts(q, "tensor_metric")[unroofed],
            r.tensor_dtypes[unroofed])
    return reason


def _bandwidths(q: pd.DataFrame, r: Roofs, level: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The bandwidth roof of `level` per kernel, its source and, where there is none, why: the export's ncu
    figure, else (or with --machine) the machine's figure for the counter the kernel's bytes came from
    (bytes_counter_<level>: A100's L2 tag stage, lts__t, serves 1.5x what lts2xbar returns to the SMs)."""
    bw = column(q, f"bandwidth_bytes_per_s_{level}").astype("float64").to_numpy().copy()
    bw_src = texts(q, f"ceiling_source_{level}").copy()
    reason = np.full(len(q), "", dtype=object)
    if len(q):
        counters = texts(q, f"bytes_counter_{level}")
        codes, first = row_codes(r.mach_codes, counters)  # each (machine, counter) looked up once
        spec = [_machine_bandwidth(r.kernel_machines[r.mach_codes[i]], level, counters[i])
                for i in first.tolist()]
        spec_bw = np.array([v for v, _, _ in spec], dtype=float)[codes]
        spec_src = np.array([s_ for _, s_, _ in spec], dtype=object)[codes]
        spec_why = np.array([w for _, _, w in spec], dtype=object)[codes]
        from_spec = np.isnan(bw) | (r.what_if & ~np.isnan(spec_bw))
        bw[from_spec] = spec_bw[from_spec]
        bw_src[from_spec] = spec_src[from_spec]
        bw_src[~from_spec & (bw_src == "")] = "ncu"
        reason[np.isnan(bw)] = spec_why[np.isnan(bw)]
    return bw, bw_src, reason


def machine_of(device: str, machine: Machine | None = None) -> Machine | None:
    """The machine whose figures are a device's roofs: `machine` (--machine) when given, else the datasheet
    entry the device name resolves to (None when it does not, or is ambiguous)."""
    return machines.for_devices(machine)(device)


def machines_used(devices: Sequence[str], machine: Machine | None = None) -> list[Machine]:
    """The distinct machines the devices' roofs come from (by name, first seen first)."""
    if machine is not None:
        return [machine]
    seen: dict[str, Machine] = {}
    for device in devices:
        m = machine_of(device)
        if m is not None:
            seen[m.name] = m
    return list(seen.values())


def _peaks(q: pd.DataFrame, r: Roofs) -> tuple[np.ndarray, np.ndarray]:
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
        ncu_value = column(q, f"peak_flop_per_s_{p}").astype("float64").to_numpy()
        ncu_src = texts(q, f"ceiling_source_{p}")
        spec_value = np.full(n, np.nan)
        spec_src = np.full(n, "", dtype=object)
        wanted = np.flatnonzero(rows & (np.isnan(ncu_value) | r.what_if))
        if wanted.size:
            spec_value[wanted], spec_src[wanted] = _spec_peaks(r, p, wanted, cache)
        from_ncu = rows & ~np.isnan(ncu_value) & ~(r.what_if & ~np.isnan(spec_value))
        peak[from_ncu] = ncu_value[from_ncu]
        peak_src[from_ncu] = np.where(ncu_src[from_ncu] == "", "ncu", ncu_src[from_ncu])
        from_spec = rows & ~from_ncu
        peak[from_spec] = spec_value[from_spec]
        peak_src[from_spec] = spec_src[from_spec]
    return peak, peak_src

def _spec_peaks(r: Roofs, precision: str, rows: np.ndarray, cache: dict[tuple[int, str], tuple[float, str]]
                ) -> tuple[np.ndarray, np.ndarray]:
    """The machine's compute roof and its source for the kernels `rows` of `precision`: looked up once per
    distinct (machine, key); for tensor FLOPs the key is the dominant path's dtype."""
    machine_codes = r.mach_codes[rows]
    if precision == "tensor":
        dtypes = r.tensor_dtypes[rows]
        codes, first = row_codes(machine_codes, dtypes)
        keys = [f"tensor:{d}" if d else "tensor:?" for d in dtypes[first]]
    else:
        codes, first = row_codes(machine_codes)
        keys = [precision] * len(first)
    found = [_spec_peak(r.kernel_machines[c], key, cache)
             for c, key in zip(machine_codes[first].tolist(), keys, strict=True)]
    return (np.array([value for value, _ in found], dtype=float)[codes],
            np.array([source for _, source in found], dtype=object)[codes])


def _tensor_dtypes(q: pd.DataFrame) -> np.ndarray:
    """Per kernel, the dtype of its tensor roof (None: no single one): stated by an analytic source
    (`tensor_dtype`, e.g. a bf16 matmul), else read from the dominant sm__ops_path_tensor_* metric
    (`tensor_metric`), else — for FLOPs estimated from the tensor-pipe count — the HMMA FP16 path."""
    estimated = ~np.isnan(column(q, "tensor_inst").astype("float64").to_numpy())
    return map_rows(lambda stated, metric, est: stated or tensor_dtype(metric) or
                    (tp.TENSOR_ESTIMATE_DTYPE if est else None),
                    texts(q, "tensor_dtype"), texts(q, "tensor_metric"), estimated)


def _peak_reason(precision: str, device: str, machine: Machine | None, tensor_metric: str,
                 dtype: str | None) -> str:
    if not precision:
        return "peak_flop_per_s (no precision: the dtype was not recorded)"
    if machine is None:
        return (f"peak_flop_per_s[{precision}] (no ncu peak metric; {machines.unknown_device(device)}: "
                "pass --machine)")
    if precision == "tensor":
        what = f"tensor {dtype}" if dtype else f"tensor path {tensor_metric or '(none named)'}"
        return f"peak_flop_per_s[{what}] (no ncu peak metric; {machine.label} has no dense figure for it)"
    return f"peak_flop_per_s[{precision}] (no ncu peak metric; {machine.label} has no figure for it)"
