"""The chart's data, computed from the report (one row per kernel × level) by pure functions that tests
can read; nsroof.report.plots only draws these frames, and the HTML page reads them for its tooltips.

- `chart_data(df, …)`: one row per plotted candidate (kernel × level): x = the report's `intensity`,
  y = the report's `achieved_flop_per_s`, marker area ∝ the kernel's share of the run's time, the top-N
  label, and why a point could not be placed on log-log axes.
- `roof_lines(df, …)`: the compute roof of every precision present and the bandwidth roof of every level,
  per distinct ceiling (device × ceiling source), taken from the report's `peak_flop_per_s` /
  `bandwidth_bytes_per_s` columns. Roofs measured per kernel at the profiled clock (ncu) may differ a
  little between kernels: the chart then draws the range (min to max) rather than picking one value.
- `ridge_points(df, …)`: the report's `ridge` column with the roof it sits under.
- `unplotted(data)`: the kernels with no point, and why (listed under the chart, never dropped silently).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import numpy as np
import pandas as pd

from nsroof.errors import NsroofError
from nsroof.frames.distinct import map_rows
from nsroof.names.kernel_names import fit_name
from nsroof.schema import LEVELS, PRECISIONS, cpu_ops_only, kernel_key

#: report columns the chart reads
REQUIRED_COLUMNS: tuple[str, ...] = (
    "source", "kernel_id", "kernel_name", "function", "device", "nvtx_path", "duration_s", "precision",
    "peak_flop_per_s", "level", "bandwidth_bytes_per_s", "intensity", "ridge", "achieved_flop_per_s",
    "bound", "above_roof", "ceiling_source", "missing",
)

LEVEL_NAMES: dict[str, str] = {"dram": "DRAM", "l2": "L2", "l1": "L1",
                               "link": "the GPU's links (a collective)"}


def precision_name(precision: str, cpu: bool) -> str:
    """A precision as a page or chart names it. The report's "tensor" (a GPU's tensor cores: the dense peak
    of the op's dtype) is "matrix" on a CPU, where that roof is the matmul peak `nsroof measure` timed at
    the dtype (AMX tiles or AVX-512 BF16/FP16 dot products, whichever the CPU has): a CPU has no tensor
    cores. The Parquet column keeps "tensor" on both, so one filter reads every report."""
    return "matrix" if cpu and precision == "tensor" else precision


#: marker area in pt² of a kernel that takes the whole run's time; area ∝ share of time
AREA_PT2_PER_SHARE = 2400.0
#: the smallest marker area, so a kernel with a tiny share stays visible (the only departure from ∝)
MIN_AREA_PT2 = 9.0
#: kernels listed by name under the chart before "… and N more"
MAX_UNPLOTTED_LINES = 10
SHORT_NAME_CHARS = 32


def check_columns(df: pd.DataFrame, required: Sequence[str] = REQUIRED_COLUMNS) -> list[str]:
    """Names of required report columns that `df` lacks (empty when it has them all)."""
    return [c for c in required if c not in df.columns]




def short_name(name: str, width: int = SHORT_NAME_CHARS) -> str:
    """A label-sized function name: templates and parameters dropped, long names cut with '…'."""
    text = str(name).strip()
    # the report's `function` is already short; kernel names as a fallback still carry templates
    text = re.sub(r"^void\s+", "", text)
    depth = 0
    out: list[str] = []
    for ch in text:
        if ch in "<(":
            if depth == 0 and out:
                break
            depth += 1
        out.append(ch)
    text = "".join(out).strip() or str(name)
    return fit_name(text, width)


def row_noun(df: pd.DataFrame) -> str:
    """What a report's rows time, as the charts and listings name them: 'op' when every row is an op call of
    a CPU profile (kind cpu_op; a CPU runs no kernels), else 'kernel'."""
    return "op" if cpu_ops_only(df) else "kernel"


def point_label(name: str, module: object = "") -> str:
    """A point's label: the short function or op name, and for an op that ran inside an nn.Module the
    module's last path components after '@' (`aten::mm @ layers.3.mlp.up_proj`): two layers' GEMMs share
    the op's name, not the module's."""
    module = module if isinstance(module, str) else ""
    if not module:
        return short_name(name)
    from nsroof.names.kernel_names import fit_tail

    return f"{short_name(name, SHORT_NAME_CHARS - 12)} @ {fit_tail(module, 22)}"


def kernels(df: pd.DataFrame) -> pd.DataFrame:
    """One row per kernel of the report, longest first: key, identity, duration_s, time_share, rank.

    time_share = duration_s / Σ duration_s over all kernels of the report (NaN durations count 0)."""
    key = kernel_key(df)
    cols = [c for c in ("source", "kernel_id", "kernel_name", "function", "device", "nvtx_path", "duration_s",
                        "precision", "module") if c in df.columns]
    k = df[cols].assign(key=key.to_numpy()).drop_duplicates("key").reset_index(drop=True)
    k["duration_s"] = k["duration_s"].astype("float64")
    total_s = float(np.nansum(k["duration_s"].to_numpy()))
    k["time_share"] = k["duration_s"] / total_s if total_s > 0 else np.nan
    k = _by_time(k)
    k["rank"] = np.arange(1, len(k) + 1, dtype=np.int64)
    return k


def _by_time(k: pd.DataFrame) -> pd.DataFrame:
    """Longest first; ties (and NaN durations, last) ordered by source then kernel_id: stable output."""
    order = pd.DataFrame({
        "neg": -k["duration_s"].astype("float64").fillna(-np.inf),
        "source": k["source"].astype(str),
        "kid": pd.to_numeric(k["kernel_id"], errors="coerce").astype("float64"),
    })
    idx = order.sort_values(["neg", "source", "kid"], kind="stable").index
    return k.loc[idx].reset_index(drop=True)


def select(df: pd.DataFrame, *, level: str = "all", nvtx: str | None = None,
           precision: str | None = None) -> pd.DataFrame:
    """The report rows the chart shows: one level or all, NVTX paths matching a regex, one precision."""
    if level != "all" and level not in LEVELS:
        raise NsroofError(f"unknown level {level!r}: use all, {', '.join(LEVELS)}")
    if precision is not None and precision not in PRECISIONS:
        raise NsroofError(f"unknown precision {precision!r}: use {', '.join(PRECISIONS)}")
    rows = df
    if level != "all":
        rows = rows[rows["level"].astype(str) == level]
    if nvtx:
        try:
            pattern = re.compile(nvtx)
        except re.error as exc:
            raise NsroofError(f"--nvtx {nvtx!r} is not a valid regular expression: {exc}") from None
        rows = rows[rows["nvtx_path"].astype(str).map(lambda p: pattern.search(p) is not None).astype(bool)]
    if precision is not None:
        rows = rows[rows["precision"].astype(str) == precision]
    return rows


def _why_not(x: float, y: float, flops_known: bool, missing: str, level: str) -> str:
    """Why (x, y) cannot sit on log-log axes; '' when it can."""
    if np.isfinite(x) and np.isfinite(y) and x > 0 and y > 0:
        return ""
    detail = f" (missing: {missing})" if missing else ""
    if not np.isfinite(y) or (np.isnan(x) and not flops_known):
        return f"no FLOP/s{detail}"
    if y == 0 or x == 0:
        return "no FLOPs (intensity 0: nothing to place on log axes)"
    if np.isinf(x):
        return f"0 bytes at {LEVEL_NAMES.get(level, level)} (intensity ∞)"
    return f"no bytes at {LEVEL_NAMES.get(level, level)}{detail}"


def chart_data(df: pd.DataFrame, *, level: str = "all", top: int = 10, nvtx: str | None = None,
               precision: str | None = None) -> pd.DataFrame:
    """The points of the chart: one row per (kernel, level) shown, longest kernel first, levels in
    report order. x_intensity / y_flop_per_s are the report's intensity / achieved_flop_per_s unchanged;
    time_share is the kernel's share of the whole report's time; marker_area_pt2 =
    max(MIN_AREA_PT2, AREA_PT2_PER_SHARE × time_share); `label` holds the short function name on the
    first plotted point (DRAM, then L2, then L1) of the `top` longest kernels shown; `why_not` is ''
    for a plotted point, else the reason it is not on the chart."""
    missing_cols = check_columns(df)
    if missing_cols:
        raise NsroofError(f"the report lacks columns {', '.join(missing_cols)}: write it with nsroof analyze")
    per_kernel = kernels(df)
    rows = select(df, level=level, nvtx=nvtx, precision=precision)
    key = kernel_key(rows)
    # as Python objects: an Arrow string column's isin takes a second over a real run's keys
    shown = per_kernel[pd.Index(per_kernel["key"].to_numpy(dtype=object), dtype=object)
                       .isin(pd.unique(key.to_numpy(dtype=object)))].reset_index(drop=True)
    shown["rank"] = np.arange(1, len(shown) + 1, dtype=np.int64)  # rank among the kernels shown

    level_rank = {lv: i for i, lv in enumerate(LEVELS)}
    pts = pd.DataFrame({
        "key": key.to_numpy(),
        "level": rows["level"].astype(str).to_numpy(),
        "x_intensity": rows["intensity"].astype("float64").to_numpy(),
        "y_flop_per_s": rows["achieved_flop_per_s"].astype("float64").to_numpy(),
        "flops_known": (rows["flops"].astype("float64").notna().to_numpy() if "flops" in rows
                        else rows["achieved_flop_per_s"].astype("float64").notna().to_numpy()),
        "bound": rows["bound"].astype(str).to_numpy(),
        "above_roof": rows["above_roof"].astype("boolean").fillna(False).astype(bool).to_numpy(),
        "peak_flop_per_s": rows["peak_flop_per_s"].astype("float64").to_numpy(),
        "bandwidth_bytes_per_s": rows["bandwidth_bytes_per_s"].astype("float64").to_numpy(),
        "ceiling_source": rows["ceiling_source"].astype(str).to_numpy(),
        "missing": rows["missing"].astype(str).replace({"nan": "", "<NA>": ""}).to_numpy(),
    })
    pts["level_order"] = pts["level"].map(level_rank).fillna(len(LEVELS)).astype("int64")
    pts = pts.merge(shown[["key", "rank", "source", "kernel_id", "function", "kernel_name", "device",
                           "nvtx_path", "duration_s", "time_share",
                           *(["module"] if "module" in shown else [])]], on="key", how="left")
    pts = pts.sort_values(["rank", "level_order"], kind="stable").reset_index(drop=True)

    x, y = pts["x_intensity"].to_numpy(dtype="float64"), pts["y_flop_per_s"].to_numpy(dtype="float64")
    with np.errstate(invalid="ignore"):
        placed = np.isfinite(x) & np.isfinite(y) & (x > 0) & (y > 0)  # _why_not's '' (the common case)
    why_not = np.full(len(pts), "", dtype=object)
    lost = ~placed
    why_not[lost] = [_why_not(*point) for point in zip(
        x[lost].tolist(), y[lost].tolist(), pts["flops_known"].to_numpy()[lost].tolist(),
        pts["missing"].to_numpy(dtype=object)[lost].tolist(),
        pts["level"].to_numpy(dtype=object)[lost].tolist(), strict=True)]
    pts["why_not"] = why_not.tolist()
    pts["plotted"] = pts["why_not"] == ""
    share = pts["time_share"].astype("float64").fillna(0.0).to_numpy()
    pts["marker_area_pt2"] = np.maximum(MIN_AREA_PT2, AREA_PT2_PER_SHARE * share)

    first_plotted = pts["plotted"] & ~pts.duplicated(subset=["key", "plotted"])
    is_top = pts["rank"] <= max(int(top), 0)
    labelled = (first_plotted & is_top).to_numpy(dtype=bool)
    names = np.full(len(pts), "", dtype=object)  # the labels' names only: a report has millions of points
    modules = (pts["module"].to_numpy(dtype=object)[labelled] if "module" in pts
               else np.full(int(labelled.sum()), "", dtype=object))
    names[labelled] = [point_label(f if isinstance(f, str) and f else n, m) for f, n, m in
                       zip(pts["function"].to_numpy(dtype=object)[labelled],
                           pts["kernel_name"].to_numpy(dtype=object)[labelled], modules, strict=True)]
    pts["label"] = np.where(labelled, names, "")
    columns = ["source", "kernel_id", "function", "kernel_name", "device", "nvtx_path", "level", "rank",
               "duration_s", "time_share", "x_intensity", "y_flop_per_s", "marker_area_pt2", "label", "bound",
               "above_roof", "peak_flop_per_s", "bandwidth_bytes_per_s", "ceiling_source", "plotted",
               "why_not", "key"]
    return pts[columns]


def unplotted(data: pd.DataFrame) -> pd.DataFrame:
    """Kernels of `chart_data` missing a point at one or more levels shown, longest first: those with
    no point at all (partial=False) before those missing some levels (partial=True), with the reasons."""
    keys = data["key"].to_numpy(dtype=object)
    plotted = data["plotted"].to_numpy(dtype=bool)
    with_point = set(keys[plotted].tolist())
    lost: dict[str, list[int]] = {}  # key -> its rows without a point, keys in order of first appearance
    for i, key in zip(np.flatnonzero(~plotted).tolist(), keys[~plotted].tolist(), strict=True):
        lost.setdefault(key, []).append(i)
    level, why_not = data["level"].tolist(), data["why_not"].tolist()
    facts = {c: data[c].to_numpy(dtype=object) for c in ("source", "kernel_id", "function", "kernel_name",
                                                         "rank", "duration_s", "time_share")}
    out = []
    for key, rows in lost.items():
        reasons: dict[str, list[str]] = {}
        for i in rows:
            reasons.setdefault(why_not[i], []).append(LEVEL_NAMES.get(level[i], level[i]))
        partial = key in with_point
        why_text = "; ".join(
            why if (len(reasons) == 1 and not partial) else f"{'/'.join(lvs)}: {why}"
            for why, lvs in reasons.items()
        )
        first = rows[0]
        out.append({
            "key": key, "source": facts["source"][first], "kernel_id": facts["kernel_id"][first],
            "function": facts["function"][first], "kernel_name": facts["kernel_name"][first],
            "rank": int(facts["rank"][first]), "duration_s": facts["duration_s"][first],
            "time_share": facts["time_share"][first], "partial": partial, "reason": why_text,
        })
    cols = ["key", "source", "kernel_id", "function", "kernel_name", "rank", "duration_s", "time_share",
            "partial", "reason"]
    frame = pd.DataFrame(out, columns=cols)
    if frame.empty:
        return frame
    return frame.sort_values(["partial", "rank"], kind="stable").reset_index(drop=True)


def split_ceiling_source(source: str) -> tuple[str, str]:
    """(compute roof source, bandwidth roof source) from the report's ceiling_source, which is one
    label ('spec:H100 SXM') or 'compute=…; memory=…' when the two roofs came from different places."""
    s = str(source)
    if s.startswith("compute=") and "; memory=" in s:
        compute, memory = s[len("compute="):].split("; memory=", 1)
        return compute, memory
    return s, s


def source_family(source: str) -> str:
    """The ceiling a roof belongs to: 'ncu' for roofs ncu measured at each kernel's profiled clock
    (whatever the metric formula), else the machine label without the figure it names
    ('spec:RTX 3070#simt_flop_per_s.fp32' -> 'spec:RTX 3070')."""
    s = str(source)
    if s.startswith("ncu"):
        return "ncu"
    # datasheet roofs at each kernel's recorded clock ('spec:A10G @ 1315 MHz SM'): one set, like ncu's
    head, at, _ = s.split("#", 1)[0].partition(" @ ")
    return f"{head} @ profiled clock" if at else head


def roof_lines(df: pd.DataFrame, *, level: str = "all", nvtx: str | None = None,
               precision: str | None = None) -> pd.DataFrame:
    """One row per roof: kind ('compute' | 'bandwidth'), name (precision or level), title (the name as a
    page shows it: LEVEL_NAMES, precision_name), device, source, family (see `source_family`), value_min /
    value_max over the kernels under it (equal unless the roof was measured per kernel), n_kernels, and
    ceiling_set: the index of the (device, family) pair it belongs to — one roof set per distinct
    ceiling."""
    rows = select(df, level=level, nvtx=nvtx, precision=precision)
    key = kernel_key(rows)
    # per distinct source text (a report has a few, over hundreds of thousands of rows)
    split = map_rows(split_ceiling_source, rows["ceiling_source"].astype(str).to_numpy(dtype=object))
    comp_src, mem_src = zip(*split.tolist(), strict=True) if len(rows) else ((), ())
    base = pd.DataFrame({
        "key": key.to_numpy(),
        "device": rows["device"].astype(str).to_numpy(),
        "precision": rows["precision"].astype(str).to_numpy(),
        "level": rows["level"].astype(str).to_numpy(),
        "peak": rows["peak_flop_per_s"].astype("float64").to_numpy(),
        "bw": rows["bandwidth_bytes_per_s"].astype("float64").to_numpy(),
        "compute_source": list(comp_src),
        "memory_source": list(mem_src),
    })
    comp = base[(base["precision"] != "") & np.isfinite(base["peak"]) & (base["peak"] > 0)]
    mem = base[np.isfinite(base["bw"]) & (base["bw"] > 0)]
    parts = [_roofs_of(comp, "peak", "compute_source", "precision", "compute"),
             _roofs_of(mem, "bw", "memory_source", "level", "bandwidth")]
    parts = [part for part in parts if len(part)]
    cols = ["kind", "name", "title", "device", "source", "family", "value_min", "value_max", "n_kernels",
            "ceiling_set"]
    if not parts:
        return pd.DataFrame(columns=cols)
    roofs = pd.concat(parts, ignore_index=True)
    order = {"compute": 0, "bandwidth": 1}
    name_order = {n: i for i, n in enumerate((*PRECISIONS, *LEVELS))}
    roofs["_k"] = roofs["kind"].map(order)
    roofs["_n"] = roofs["name"].map(name_order)
    roofs["family"] = roofs["source"].map(source_family)
    cpu = cpu_ops_only(rows)
    roofs["title"] = [LEVEL_NAMES.get(n, n) if k == "bandwidth" else precision_name(n, cpu)
                      for k, n in zip(roofs["kind"], roofs["name"], strict=True)]
    sets = sorted(set(zip(roofs["device"], roofs["family"], strict=True)))
    set_index = {s: i for i, s in enumerate(sets)}
    roofs["ceiling_set"] = [set_index[(d, f)] for d, f in zip(roofs["device"], roofs["family"], strict=True)]
    roofs = roofs.sort_values(["ceiling_set", "_k", "_n", "source"], kind="stable").reset_index(drop=True)
    return roofs[cols]


def _roofs_of(rows: pd.DataFrame, value: str, source: str, name: str, kind: str) -> pd.DataFrame:
    """One roof per (device, source, name) of `rows`: the range of `value` over its kernels."""
    if rows.empty:
        return rows.iloc[0:0]
    g = rows.groupby(["device", source, name], sort=True)
    out = g.agg(value_min=(value, "min"), value_max=(value, "max"),
                n_kernels=("key", "nunique")).reset_index()
    return out.rename(columns={source: "source", name: "name"}).assign(kind=kind)


def ridge_points(df: pd.DataFrame, *, level: str = "all", nvtx: str | None = None,
                 precision: str | None = None) -> pd.DataFrame:
    """Distinct ridge points of the report rows shown: x = the report's `ridge`, y = `peak_flop_per_s`,
    with the precision and level they join (values kept to 6 significant digits to merge duplicates)."""
    rows = select(df, level=level, nvtx=nvtx, precision=precision)
    r = pd.DataFrame({
        "precision": rows["precision"].astype(str).to_numpy(),
        "level": rows["level"].astype(str).to_numpy(),
        "x_ridge": rows["ridge"].astype("float64").to_numpy(),
        "y_peak_flop_per_s": rows["peak_flop_per_s"].astype("float64").to_numpy(),
    })
    r = r[(r["precision"] != "") & np.isfinite(r["x_ridge"]) & (r["x_ridge"] > 0)
          & np.isfinite(r["y_peak_flop_per_s"]) & (r["y_peak_flop_per_s"] > 0)]
    r = r.assign(_x=_sig(r["x_ridge"]), _y=_sig(r["y_peak_flop_per_s"]))
    r = r.drop_duplicates(["precision", "level", "_x", "_y"]).sort_values(["_y", "_x", "precision", "level"])
    return r.drop(columns=["_x", "_y"]).reset_index(drop=True)


def _sig(values: pd.Series, digits: int = 6) -> pd.Series:
    """Each value kept to `digits` significant digits, worked out once per distinct value."""
    distinct, inverse = np.unique(values.to_numpy(dtype="float64"), return_inverse=True)
    rounded = np.array([float(f"{v:.{digits}g}") for v in distinct.tolist()], dtype="float64")
    return pd.Series(rounded[inverse.reshape(-1)], index=values.index)



def short_source(source: str, width: int = 34) -> str:
    return fit_name(str(source), width)


