"""Hierarchical roofline charts of a whole run, drawn from the report (one row per kernel × level).

Everything drawn is computed first by pure functions that tests can read:

- `chart_data(df, …)`: one row per plotted candidate (kernel × level): x = the report's `intensity`,
  y = the report's `achieved_flop_per_s`, marker area ∝ the kernel's share of the run's time, the top-N
  label, and why a point could not be placed on log-log axes.
- `roof_lines(df, …)`: the compute roof of every precision present and the bandwidth roof of every level,
  per distinct ceiling (device × ceiling source), taken from the report's `peak_flop_per_s` /
  `bandwidth_bytes_per_s` columns. Roofs measured per kernel at the profiled clock (ncu) may differ a
  little between kernels: the chart then draws the range (min to max) rather than picking one value.
- `ridge_points(df, …)`: the report's `ridge` column with the roof it sits under.
- `unplotted(data)`: the kernels with no point, and why (listed under the chart, never dropped silently).

`plot()` only draws those frames. matplotlib is imported inside functions (Agg, no pyplot, no global
state); fonts, sizes and SVG ids are fixed so the same report gives the same SVG bytes.
"""

from __future__ import annotations

import io
import math
import os
import re
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from nsroof.errors import NsroofError
from nsroof.schema import LEVELS, PRECISIONS, kernel_key

if TYPE_CHECKING:  # pragma: no cover
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

#: report columns the chart reads
REQUIRED_COLUMNS: tuple[str, ...] = (
    "source", "kernel_id", "kernel_name", "function", "device", "nvtx_path", "duration_s", "precision",
    "peak_flop_per_s", "level", "bandwidth_bytes_per_s", "intensity", "ridge", "achieved_flop_per_s",
    "bound", "above_roof", "ceiling_source", "missing",
)

LEVEL_NAMES: dict[str, str] = {"dram": "DRAM", "l2": "L2", "l1": "L1"}
LEVEL_COLORS: dict[str, str] = {"dram": "#1f5fa8", "l2": "#23994a", "l1": "#e0780f"}
PRECISION_COLORS: dict[str, str] = {"fp64": "#7a1f5c", "fp32": "#333333", "fp16": "#6b4fa0", "tensor": "#a0522d"}
ABOVE_ROOF_COLOR = "#d62728"
SET_LINESTYLES: tuple[Any, ...] = ("-", "--", ":", "-.")

#: marker area in pt² of a kernel that takes the whole run's time; area ∝ share of time
AREA_PT2_PER_SHARE = 2400.0
#: the smallest marker area, so a kernel with a tiny share stays visible (the only departure from ∝)
MIN_AREA_PT2 = 9.0
#: kernels listed by name under the chart before "… and N more"
MAX_UNPLOTTED_LINES = 10
SHORT_NAME_CHARS = 32
#: characters of one listing line under the chart (the figure is 10 in wide at 8 pt)
LISTING_CHARS = 150
#: above this many points, markers and joins are drawn as an embedded bitmap in SVG/PDF (roofs and text
#: stay vector): keeps the inline SVG of a large run small and quick to render
RASTERIZE_POINTS = 1500

#: fixed rc settings: same fonts and sizes everywhere, so renders are comparable and SVG ids stable
RC: dict[str, Any] = {
    "font.family": "DejaVu Sans",  # ships with matplotlib: no dependency on the host's fonts
    "font.size": 9.0,
    "axes.titlesize": 11.0,
    "axes.labelsize": 9.5,
    "legend.fontsize": 8.0,
    "xtick.labelsize": 8.5,
    "ytick.labelsize": 8.5,
    "figure.dpi": 100.0,
    "savefig.dpi": 110.0,
    "svg.fonttype": "none",  # text stays text: smaller, searchable SVG
    "svg.hashsalt": "nsroof",
    "path.simplify": True,
}

# Figure geometry in inches (fixed, so the bandwidth-label angle computed from it is right).
_FIG_W_IN = 10.0
_AX_LEFT_IN, _AX_W_IN = 0.85, 6.6
_AX_H_IN = 5.4
_TOP_IN = 0.45
_BOTTOM_IN = 0.6
_LINE_IN = 0.17


# ----------------------------------------------------------------------------------------- data


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
    return text if len(text) <= width else text[: width - 1] + "…"


def kernels(df: pd.DataFrame) -> pd.DataFrame:
    """One row per kernel of the report, longest first: key, identity, duration_s, time_share, rank.

    time_share = duration_s / Σ duration_s over all kernels of the report (NaN durations count 0)."""
    key = kernel_key(df)
    cols = [c for c in ("source", "kernel_id", "kernel_name", "function", "device", "nvtx_path", "duration_s",
                        "precision") if c in df.columns]
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
    shown = per_kernel[per_kernel["key"].isin(set(key))].reset_index(drop=True)
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
                           "nvtx_path", "duration_s", "time_share"]], on="key", how="left")
    pts = pts.sort_values(["rank", "level_order"], kind="stable").reset_index(drop=True)

    pts["why_not"] = [
        _why_not(x, y, fk, m, lv)
        for x, y, fk, m, lv in zip(pts["x_intensity"], pts["y_flop_per_s"], pts["flops_known"], pts["missing"],
                                   pts["level"], strict=True)
    ]
    pts["plotted"] = pts["why_not"] == ""
    share = pts["time_share"].astype("float64").fillna(0.0).to_numpy()
    pts["marker_area_pt2"] = np.maximum(MIN_AREA_PT2, AREA_PT2_PER_SHARE * share)

    names = [
        short_name(f if isinstance(f, str) and f else n)
        for f, n in zip(pts["function"], pts["kernel_name"], strict=True)
    ]
    first_plotted = pts["plotted"] & ~pts.duplicated(subset=["key", "plotted"])
    is_top = pts["rank"] <= max(int(top), 0)
    pts["label"] = np.where(first_plotted & is_top, names, "")
    columns = ["source", "kernel_id", "function", "kernel_name", "device", "nvtx_path", "level", "rank",
               "duration_s", "time_share", "x_intensity", "y_flop_per_s", "marker_area_pt2", "label", "bound",
               "above_roof", "peak_flop_per_s", "bandwidth_bytes_per_s", "ceiling_source", "plotted", "why_not",
               "key"]
    return pts[columns]


def unplotted(data: pd.DataFrame) -> pd.DataFrame:
    """Kernels of `chart_data` missing a point at one or more levels shown, longest first: those with
    no point at all (partial=False) before those missing some levels (partial=True), with the reasons."""
    out = []
    any_plotted = data.groupby("key", sort=False)["plotted"].any()
    for key, lost in data[~data["plotted"]].groupby("key", sort=False):
        reasons: dict[str, list[str]] = {}
        for lv, why in zip(lost["level"], lost["why_not"], strict=True):
            reasons.setdefault(why, []).append(LEVEL_NAMES.get(lv, lv))
        partial = bool(any_plotted[key])
        why_text = "; ".join(
            why if (len(reasons) == 1 and not partial) else f"{'/'.join(lvs)}: {why}"
            for why, lvs in reasons.items()
        )
        first = lost.iloc[0]
        out.append({
            "key": key, "source": first["source"], "kernel_id": first["kernel_id"], "function": first["function"],
            "kernel_name": first["kernel_name"], "rank": int(first["rank"]), "duration_s": first["duration_s"],
            "time_share": first["time_share"], "partial": partial, "reason": why_text,
        })
    cols = ["key", "source", "kernel_id", "function", "kernel_name", "rank", "duration_s", "time_share", "partial",
            "reason"]
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
    """One row per roof: kind ('compute' | 'bandwidth'), name (precision or level), device, source,
    family (see `source_family`), value_min / value_max over the kernels under it (equal unless the roof
    was measured per kernel), n_kernels, and ceiling_set: the index of the (device, family) pair it
    belongs to — one roof set per distinct ceiling."""
    rows = select(df, level=level, nvtx=nvtx, precision=precision)
    key = kernel_key(rows)
    comp_src, mem_src = zip(*(split_ceiling_source(s) for s in rows["ceiling_source"].astype(str)), strict=True) \
        if len(rows) else ((), ())
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
    parts = []
    comp = base[(base["precision"] != "") & np.isfinite(base["peak"]) & (base["peak"] > 0)]
    if len(comp):
        g = comp.groupby(["device", "compute_source", "precision"], sort=True)
        c = g.agg(value_min=("peak", "min"), value_max=("peak", "max"), n_kernels=("key", "nunique")).reset_index()
        c = c.rename(columns={"compute_source": "source", "precision": "name"})
        c["kind"] = "compute"
        parts.append(c)
    mem = base[np.isfinite(base["bw"]) & (base["bw"] > 0)]
    if len(mem):
        g = mem.groupby(["device", "memory_source", "level"], sort=True)
        m = g.agg(value_min=("bw", "min"), value_max=("bw", "max"), n_kernels=("key", "nunique")).reset_index()
        m = m.rename(columns={"memory_source": "source", "level": "name"})
        m["kind"] = "bandwidth"
        parts.append(m)
    cols = ["kind", "name", "device", "source", "family", "value_min", "value_max", "n_kernels", "ceiling_set"]
    if not parts:
        return pd.DataFrame(columns=cols)
    roofs = pd.concat(parts, ignore_index=True)
    order = {"compute": 0, "bandwidth": 1}
    name_order = {n: i for i, n in enumerate((*PRECISIONS, *LEVELS))}
    roofs["_k"] = roofs["kind"].map(order)
    roofs["_n"] = roofs["name"].map(name_order)
    roofs["family"] = roofs["source"].map(source_family)
    sets = sorted(set(zip(roofs["device"], roofs["family"], strict=True)))
    set_index = {s: i for i, s in enumerate(sets)}
    roofs["ceiling_set"] = [set_index[(d, f)] for d, f in zip(roofs["device"], roofs["family"], strict=True)]
    roofs = roofs.sort_values(["ceiling_set", "_k", "_n", "source"], kind="stable").reset_index(drop=True)
    return roofs[cols]


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
    return values.map(lambda v: float(f"{v:.{digits}g}"))


def si(value: float, unit: str = "") -> str:
    """3 significant digits with a decimal SI prefix: si(1.95e13, 'FLOP/s') == '19.5 TFLOP/s'."""
    if value is None or not np.isfinite(value):
        return "—"
    if value == 0:
        return f"0 {unit}".strip()
    prefixes = ((1e18, "E"), (1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k"), (1.0, ""),
                (1e-3, "m"), (1e-6, "µ"), (1e-9, "n"))
    mag = abs(value)
    for scale, prefix in prefixes:
        if mag >= scale * 0.9995:
            return f"{value / scale:.3g} {prefix}{unit}".strip()
    return f"{value:.3g} {unit}".strip()


def si_range(low: float, high: float, unit: str = "") -> str:
    """Both ends with the prefix of the higher one: si_range(1.9e13, 2e13, 'FLOP/s') == '19–20 TFLOP/s'."""
    if not (np.isfinite(low) and np.isfinite(high)) or si(low, unit) == si(high, unit):
        return si(high, unit)  # equal at the precision shown
    number, _, rest = si(high, unit).partition(" ")
    scale = high / float(number) if float(number) else 1.0
    return f"{low / scale:.3g}–{number} {rest}".strip()


def short_source(source: str, width: int = 34) -> str:
    s = str(source)
    return s if len(s) <= width else s[: width - 1] + "…"


# --------------------------------------------------------------------------------------- drawing


@contextmanager
def _rc(salt: str = "nsroof") -> Iterator[None]:
    import matplotlib

    settings: Any = {**RC, "svg.hashsalt": salt}
    with matplotlib.rc_context(settings):
        yield


def plot(df: pd.DataFrame, *, level: str = "all", top: int = 10, nvtx: str | None = None,
         precision: str | None = None, ax: Axes | None = None, title: str | None = None) -> Figure:
    """Draw the hierarchical roofline of every kernel in the report `df`; returns the Figure.

    With `ax`, draws into it (the unplotted-kernel list goes under that axes); otherwise makes a
    Figure of fixed size. Save it with `save()` for byte-identical SVG output."""
    with _rc():
        data = chart_data(df, level=level, top=top, nvtx=nvtx, precision=precision)
        roofs = roof_lines(df, level=level, nvtx=nvtx, precision=precision)
        ridges = ridge_points(df, level=level, nvtx=nvtx, precision=precision)
        missing = unplotted(data)
        lines = _unplotted_lines(missing)
        if ax is None:
            from matplotlib.figure import Figure

            listing_in = _LINE_IN * len(lines) + (0.2 if lines else 0.0)
            height_in = _TOP_IN + _AX_H_IN + _BOTTOM_IN + listing_in
            fig = Figure(figsize=(_FIG_W_IN, height_in))
            ax = fig.add_axes((_AX_LEFT_IN / _FIG_W_IN, (_BOTTOM_IN + listing_in) / height_in,
                               _AX_W_IN / _FIG_W_IN, _AX_H_IN / height_in))
            if lines:
                fig.text(_AX_LEFT_IN / _FIG_W_IN - 0.05, listing_in / height_in, "\n".join(lines), va="top",
                         ha="left", fontsize=8.0, linespacing=1.25)
        else:
            root = ax.get_figure(root=True)
            assert root is not None
            fig = root
            if lines:
                ax.text(0.0, -0.11, "\n".join(lines), transform=ax.transAxes, va="top", ha="left", fontsize=8.0)
        _draw(ax, data, roofs, ridges, title=title or _title(data, level, nvtx, precision),
              empty_text="The report has no kernels" if df.empty else "No kernel matches the filters")
    return fig


def _title(data: pd.DataFrame, level: str, nvtx: str | None, precision: str | None) -> str:
    n = data["key"].nunique()
    devices = sorted({d for d in data["device"].astype(str) if d})
    what = "Hierarchical roofline" if level == "all" else f"Roofline at {LEVEL_NAMES[level]}"
    text = f"{what}: {n} kernel{'s' if n != 1 else ''}"
    if devices:
        text += " on " + ", ".join(devices[:3]) + (f" +{len(devices) - 3}" if len(devices) > 3 else "")
    filters = [f for f in (f"nvtx~{nvtx}" if nvtx else "", precision or "") if f]
    return text + (f" ({', '.join(filters)})" if filters else "")


def _unplotted_lines(missing: pd.DataFrame) -> list[str]:
    if missing.empty:
        return []
    lines: list[str] = []
    several_sources = missing["source"].nunique() > 1
    whole = missing[~missing["partial"]]
    part = missing[missing["partial"]]
    budget = MAX_UNPLOTTED_LINES
    for frame, head in (
        (whole, "Not plotted: {n} kernel{s} ({share:.1f}% of the run's time)"),
        (part, "Points missing at some levels: {n} kernel{s} ({share:.1f}% of the run's time)"),
    ):
        if frame.empty:
            continue
        share = float(np.nansum(frame["time_share"].astype("float64"))) * 100
        lines.append(head.format(n=len(frame), s="s" if len(frame) != 1 else "", share=share))
        shown = frame.head(max(budget, 1))
        for row in shown.itertuples():
            name = short_name(row.function or row.kernel_name, 40)
            where = f" [{row.source}]" if several_sources else ""
            lines.append(_clip(f"  • #{row.kernel_id} {name}{where}: {row.reason}", LISTING_CHARS))
        budget -= len(shown)
        if len(frame) > len(shown):
            lines.append(f"  • … and {len(frame) - len(shown)} more (see the report's `missing` column)")
    return lines


def _clip(text: str, width: int) -> str:
    return text if len(text) <= width else text[: width - 1] + "…"


def _limits(data: pd.DataFrame, roofs: pd.DataFrame, ridges: pd.DataFrame) -> tuple[float, float, float, float]:
    pts = data[data["plotted"]]
    xs = np.concatenate([pts["x_intensity"].to_numpy(float), ridges["x_ridge"].to_numpy(float)])
    peaks = roofs.loc[roofs["kind"] == "compute", "value_max"].to_numpy(float)
    ys = np.concatenate([pts["y_flop_per_s"].to_numpy(float), peaks])
    if xs.size == 0:
        xs = np.array([0.1, 100.0])
    if ys.size == 0:
        bws = roofs.loc[roofs["kind"] == "bandwidth", "value_max"].to_numpy(float)
        ys = np.concatenate([bws * xs.min(), bws * xs.max()]) if bws.size else np.array([1e9, 1e13])
    x_lo = 10 ** math.floor(math.log10(xs.min()) - 0.5)
    x_hi = 10 ** math.ceil(math.log10(xs.max()) + 0.3)
    y_lo = 10 ** math.floor(math.log10(ys.min()) - 0.3)
    y_hi = 10 ** (math.log10(ys.max()) + 0.45)
    return x_lo, x_hi, y_lo, y_hi


def _draw(ax: Axes, data: pd.DataFrame, roofs: pd.DataFrame, ridges: pd.DataFrame, *, title: str,
          empty_text: str = "No kernel matches the filters") -> None:
    from matplotlib.collections import LineCollection
    from matplotlib.lines import Line2D

    x_lo, x_hi, y_lo, y_hi = _limits(data, roofs, ridges)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlim(x_lo, x_hi)
    ax.set_ylim(y_lo, y_hi)
    ax.set_xlabel("Arithmetic intensity [FLOP/byte]")
    ax.set_ylabel("Performance [FLOP/s]")
    ax.set_title(title, loc="left")
    ax.grid(True, which="major", color="#dddddd", linewidth=0.6)
    ax.set_axisbelow(True)

    multi_set = roofs["ceiling_set"].nunique() > 1
    _draw_roofs(ax, roofs, x_lo, x_hi, multi_set=multi_set)
    if len(ridges):
        ax.scatter(ridges["x_ridge"], ridges["y_peak_flop_per_s"], marker="D", s=22, facecolor="white",
                   edgecolor="#444444", linewidths=0.9, zorder=4)

    pts = data[data["plotted"]]
    # the hierarchical view: a kernel's points at DRAM, L2 and L1 share one FLOP/s, so join them
    # (the points share y, so one segment from the lowest to the highest intensity covers them all)
    span = pts.groupby("key", sort=False).agg(x0=("x_intensity", "min"), x1=("x_intensity", "max"),
                                              y=("y_flop_per_s", "first"), n=("x_intensity", "size"))
    span = span[span["n"] > 1]
    segments = [((a, y), (b, y)) for a, b, y in zip(span["x0"], span["x1"], span["y"], strict=True)]
    rasterize = len(pts) > RASTERIZE_POINTS
    if segments:
        ax.add_collection(LineCollection(segments, colors="#888888", linewidths=0.7, alpha=0.6, zorder=5,
                                         rasterized=rasterize))
    for lv in LEVELS:
        p = pts[pts["level"] == lv]
        if p.empty:
            continue
        ax.scatter(p["x_intensity"], p["y_flop_per_s"], s=p["marker_area_pt2"], c=LEVEL_COLORS[lv], alpha=0.72,
                   edgecolors="white", linewidths=0.5, zorder=6, rasterized=rasterize)
    hot = pts[pts["above_roof"]]
    if len(hot):
        ax.scatter(hot["x_intensity"], hot["y_flop_per_s"], s=hot["marker_area_pt2"] * 1.5 + 40, facecolors="none",
                   edgecolors=ABOVE_ROOF_COLOR, linewidths=1.6, zorder=7, rasterized=rasterize)

    _place_labels(ax, pts)

    handles: list[Any] = [
        Line2D([], [], marker="o", linestyle="", markerfacecolor=LEVEL_COLORS[lv], markeredgecolor="white",
               markersize=7, label=f"kernel at {LEVEL_NAMES[lv]}")
        for lv in LEVELS if (pts["level"] == lv).any()
    ]
    if segments:
        handles.append(Line2D([], [], color="#888888", linewidth=0.7, label="same kernel across levels"))
    if len(hot):
        handles.append(Line2D([], [], marker="o", linestyle="", markerfacecolor="none",
                              markeredgecolor=ABOVE_ROOF_COLOR, markeredgewidth=1.6, markersize=9,
                              label="above a roof (>5%)"))
    if len(ridges):
        handles.append(Line2D([], [], marker="D", linestyle="", markerfacecolor="white", markeredgecolor="#444444",
                              markersize=5, label="ridge point"))
    for s, grp in roofs.groupby("ceiling_set", sort=True):
        first = grp.iloc[0]
        where = (" (per kernel, at the profiled clock)" if first["family"] == "ncu" else "")
        tag = f"[{int(s) + 1}] " if multi_set else ""
        handles.append(Line2D([], [], color="#555555", linestyle=SET_LINESTYLES[int(s) % len(SET_LINESTYLES)],
                              label=_wrap(f"{tag}roofs: {first['device'] or 'device ?'} · {first['family']}{where}",
                                          34)))
    if data.empty:
        ax.text(0.5, 0.5, empty_text, transform=ax.transAxes, ha="center", va="center",
                fontsize=11, color="#555555")
    elif roofs.empty:
        ax.text(1.02, 0.0, "No roofs: the report\nhas no ceilings\n(nsroof analyze\n--machine NAME|FILE)",
                transform=ax.transAxes, ha="left", va="bottom", fontsize=8.5, color=ABOVE_ROOF_COLOR)
    handles.append(Line2D([], [], linestyle="", label=f"area ∝ share of time\n(all time = {AREA_PT2_PER_SHARE:g} pt²)"))
    ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False, borderaxespad=0.0)


_LABEL_PT = 7.5
#: how far a label may move away from its marker, in label heights (a leader line joins it when moved)
_LABEL_STEPS = 5


def _label_candidates(cx: float, cy: float, gap: float, w: float, h: float) -> list[tuple[int, int, int, float, float]]:
    """(sx, sy, step, anchor x, anchor y) for every spot a label may take around its marker: beside it
    (left/right), or above/below it (right-, left- or centre-aligned), stepped away one label height
    at a time."""
    out = [(1, 0, 0, cx + gap, cy), (-1, 0, 0, cx - gap, cy)]
    for step in range(_LABEL_STEPS):
        for sy in (1, -1):
            ay = cy + sy * (gap * 0.75 + step * h * 1.15)
            out += [(1, sy, step, cx + gap * 0.75, ay), (-1, sy, step, cx - gap * 0.75, ay), (0, sy, step, cx, ay)]
    return out


def _place_labels(ax: Axes, pts: pd.DataFrame) -> None:
    """Put each top-N label near its marker where it covers the fewest markers and earlier labels
    (greedy, in rank order, so the longest kernels get the best spots; deterministic). A label moved
    away from its marker gets a thin leader line."""
    labelled = pts[pts["label"] != ""]
    if labelled.empty:
        return
    fig = ax.get_figure()
    assert fig is not None
    px_per_pt = fig.dpi / 72.0
    xy = ax.transData.transform(np.column_stack([pts["x_intensity"].to_numpy(float),
                                                 pts["y_flop_per_s"].to_numpy(float)]))
    radius = np.sqrt(pts["marker_area_pt2"].to_numpy(float) / math.pi) * px_per_pt
    markers = np.column_stack([xy[:, 0] - radius, xy[:, 1] - radius, xy[:, 0] + radius, xy[:, 1] + radius])
    labels = np.empty((0, 4))
    frame = ax.get_window_extent()
    for row in labelled.itertuples():
        i = pts.index.get_loc(row.Index)
        cx, cy = xy[i]
        text = f"{row.rank}. {row.label}"
        w = 0.6 * _LABEL_PT * len(text) * px_per_pt
        h = 1.3 * _LABEL_PT * px_per_pt
        gap = radius[i] + 3 * px_per_pt
        best: tuple[float, tuple[int, int, int, float, float], tuple[float, float, float, float]] | None = None
        for cand in _label_candidates(cx, cy, gap, w, h):
            sx, sy, step, ax0, ay0 = cand
            x0 = ax0 if sx > 0 else (ax0 - w if sx < 0 else ax0 - w / 2)
            y0 = ay0 if sy > 0 else (ay0 - h if sy < 0 else ay0 - h / 2)
            box = (x0, y0, x0 + w, y0 + h)
            cost = float(_overlaps(box, markers).sum() - _overlap(box, tuple(markers[i])))
            cost += 3 * float(_overlaps(box, labels).sum())
            cost += 4 * (w * h - _overlap(box, (frame.x0, frame.y0, frame.x1, frame.y1)))
            cost += 0.05 * w * h * step  # nearer is better when the overlap is the same
            if best is None or cost < best[0] - 1e-9:
                best = (cost, cand, box)
        assert best is not None
        (sx, sy, step, ax0, ay0), box = best[1], best[2]
        labels = np.vstack([labels, np.array(box)[None, :]])
        leader = {"arrowstyle": "-", "color": "#999999", "linewidth": 0.6, "shrinkA": 0, "shrinkB": 0} \
            if step > 0 else None
        ax.annotate(text, (row.x_intensity, row.y_flop_per_s),
                    xytext=((ax0 - cx) / px_per_pt, (ay0 - cy) / px_per_pt), textcoords="offset points",
                    fontsize=_LABEL_PT, ha={1: "left", -1: "right", 0: "center"}[sx],
                    va={1: "bottom", -1: "top", 0: "center"}[sy], zorder=8, arrowprops=leader,
                    bbox={"boxstyle": "round,pad=0.15", "fc": "white", "ec": "none", "alpha": 0.75})


def _overlaps(box: tuple[float, float, float, float], boxes: np.ndarray) -> np.ndarray:
    w = np.minimum(box[2], boxes[:, 2]) - np.maximum(box[0], boxes[:, 0])
    h = np.minimum(box[3], boxes[:, 3]) - np.maximum(box[1], boxes[:, 1])
    return np.where((w > 0) & (h > 0), w * h, 0.0)


def _overlap(a: tuple[float, float, float, float], b: tuple[float, float, float, float]) -> float:
    w = min(a[2], b[2]) - max(a[0], b[0])
    h = min(a[3], b[3]) - max(a[1], b[1])
    return w * h if w > 0 and h > 0 else 0.0


def _wrap(text: str, width: int) -> str:
    import textwrap

    return "\n".join(textwrap.wrap(text, width, break_long_words=True, break_on_hyphens=False)[:3])


def _draw_roofs(ax: Axes, roofs: pd.DataFrame, x_lo: float, x_hi: float, *, multi_set: bool) -> None:
    for s, grp in roofs.groupby("ceiling_set", sort=True):
        style = SET_LINESTYLES[int(s) % len(SET_LINESTYLES)]
        comp = grp[grp["kind"] == "compute"]
        bw = grp[grp["kind"] == "bandwidth"]
        top_peak = float(comp["value_max"].max()) if len(comp) else float("nan")
        max_bw = float(bw["value_max"].max()) if len(bw) else float("nan")
        tag = f" [{int(s) + 1}]" if multi_set else ""
        for row in comp.itertuples():
            start = row.value_max / max_bw if np.isfinite(max_bw) else x_lo
            color = PRECISION_COLORS.get(row.name, "#333333")
            ax.plot([start, x_hi], [row.value_max, row.value_max], color=color, linestyle=style, linewidth=1.6,
                    zorder=3)
            if row.value_min != row.value_max:
                ax.fill_between([start, x_hi], row.value_min, row.value_max, color=color, alpha=0.15, zorder=2,
                                linewidth=0)
            ax.text(x_hi / 1.15, row.value_max * 1.06, _roof_label(row, "FLOP/s") + tag, ha="right", va="bottom",
                    fontsize=7.5, color=color, zorder=3)
        for row in bw.itertuples():
            stop = top_peak / row.value_max if np.isfinite(top_peak) else x_hi
            color = LEVEL_COLORS.get(row.name, "#333333")
            ax.plot([x_lo, stop], [row.value_max * x_lo, row.value_max * stop], color=color, linestyle=style,
                    linewidth=1.6, zorder=3)
            if row.value_min != row.value_max:
                ax.fill_between([x_lo, stop], [row.value_min * x_lo, row.value_min * stop],
                                [row.value_max * x_lo, row.value_max * stop], color=color, alpha=0.15, zorder=2,
                                linewidth=0)
            _bandwidth_label(ax, row, x_lo, stop, color, tag, slot=int(s))


def _roof_label(row: Any, unit: str) -> str:
    name = LEVEL_NAMES.get(row.name, row.name)
    value = si_range(row.value_min, row.value_max, unit)
    return f"{name} {value} · {short_source(row.family)}"


def _bandwidth_label(ax: Axes, row: Any, x_lo: float, stop: float, color: str, tag: str, *, slot: int = 0) -> None:
    """Text along the diagonal roof; its angle comes from the axes' fixed size and log limits."""
    y_lo_lim, y_hi_lim = ax.get_ylim()
    x_lo_lim, x_hi_lim = ax.get_xlim()
    # a little right of where the roof enters the visible area, within the part of it that is drawn
    x_enter = max(x_lo, x_lo_lim, y_lo_lim / row.value_max)
    x_leave = min(stop, x_hi_lim, y_hi_lim / row.value_max)
    if x_leave <= x_enter:
        return
    # roofs of several ceilings lie close together: stagger their labels along the line
    x_at = x_enter * (x_leave / x_enter) ** (0.06 + 0.3 * (slot % 3))
    y_at = row.value_max * x_at
    if not (x_lo_lim <= x_at <= x_hi_lim and y_lo_lim <= y_at <= y_hi_lim):
        return
    bbox = ax.get_position()
    fig = ax.get_figure(root=True)
    assert fig is not None
    w_in, h_in = fig.get_size_inches()
    decade_w = bbox.width * w_in / math.log10(x_hi_lim / x_lo_lim)
    decade_h = bbox.height * h_in / math.log10(y_hi_lim / y_lo_lim)
    angle = math.degrees(math.atan2(decade_h, decade_w))
    ax.text(x_at, y_at * 1.12, _roof_label(row, "B/s") + tag, rotation=angle, rotation_mode="anchor", ha="left",
            va="bottom", fontsize=7.5, color=color, zorder=3, clip_on=True)


# ------------------------------------------------------------------------------------------ output


FORMATS: tuple[str, ...] = ("png", "svg", "pdf")


def save(fig: Figure, path: str | os.PathLike[str], *, salt: str = "nsroof") -> Path:
    """Write `fig` atomically as PNG, SVG or PDF (from the suffix), with no timestamps and fixed SVG
    ids, so the same figure gives the same bytes."""
    target = Path(path)
    fmt = target.suffix.lower().lstrip(".")
    if fmt not in FORMATS:
        raise NsroofError(f"{target}: cannot write a chart as {target.suffix or 'a file without suffix'!r}; "
                          f"use .png, .svg or .pdf")
    from nsroof.atomic import atomic_path

    with _rc(salt), atomic_path(target) as tmp:
        fig.savefig(tmp, format=fmt, metadata=_metadata(fmt))
    return target


def to_svg(fig: Figure, *, salt: str = "nsroof") -> str:
    """The figure as SVG text (ids fixed by `salt`; give each chart of one page its own salt)."""
    buf = io.StringIO()
    with _rc(salt):
        fig.savefig(buf, format="svg", metadata=_metadata("svg"))
    return buf.getvalue()


def _metadata(fmt: str) -> dict[str, Any]:
    if fmt == "svg":
        return {"Date": None}
    if fmt == "pdf":
        return {"CreationDate": None, "ModDate": None}
    return {}
