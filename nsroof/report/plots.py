"""Hierarchical roofline charts of a whole run, drawn from the frames nsroof.report.chart_data computes
(points, roofs, ridge points, the kernels not plotted) and placed by nsroof.report.chart_layout (limits,
labels, roof angles). This module only draws: matplotlib is imported inside functions (Agg, no pyplot, no
global state); fonts, sizes and SVG ids are fixed so the same report gives the same SVG bytes.
"""

from __future__ import annotations

import io
import math
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from nsroof.errors import NsroofError
from nsroof.names.kernel_names import fit_name
from nsroof.report.chart_data import (  # noqa: F401  (the names callers of plots read)
    AREA_PT2_PER_SHARE,
    LEVEL_NAMES,
    MAX_UNPLOTTED_LINES,
    MIN_AREA_PT2,
    REQUIRED_COLUMNS,
    chart_data,
    check_columns,
    kernels,
    ridge_points,
    roof_lines,
    row_noun,
    select,
    short_name,
    short_source,
    source_family,
    split_ceiling_source,
    unplotted,
)
from nsroof.report.chart_layout import limits, place_labels
from nsroof.units import human_si_range as si_range

if TYPE_CHECKING:  # pragma: no cover
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

LEVEL_COLORS: dict[str, str] = {"dram": "#1f5fa8", "l2": "#23994a", "l1": "#e0780f", "link": "#8e3fa8"}
#: a marker shape per level too, so coincident points of two levels stay apart (and colour is not the
#: only cue)
LEVEL_MARKERS: dict[str, str] = {"dram": "o", "l2": "s", "l1": "^", "link": "D"}
#: the href of a point's link in SVG output with point_links=True: POINT_LINK + hex(kernel key) + "-" + level
POINT_LINK = "#nsroof-point-"
#: the SVG group id of a kernel's label with point_links=True: LABEL_GID + hex(kernel key)
LABEL_GID = "nsroof-label-"
PRECISION_COLORS: dict[str, str] = {"fp64": "#7a1f5c", "fp32": "#333333", "fp16": "#6b4fa0",
                                    "tensor": "#a0522d"}
ABOVE_ROOF_COLOR = "#d62728"
SET_LINESTYLES: tuple[Any, ...] = ("-", "--", ":", "-.")
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



# --------------------------------------------------------------------------------------- drawing


@contextmanager
def _rc(salt: str = "nsroof") -> Iterator[None]:
    import matplotlib

    settings: Any = {**RC, "svg.hashsalt": salt}
    with matplotlib.rc_context(settings):
        yield


def plot(df: pd.DataFrame, *, level: str = "all", top: int = 10, nvtx: str | None = None,
         precision: str | None = None, ax: Axes | None = None, title: str | None = None,
         point_links: bool = False, size: tuple[float, float] | None = None) -> Figure:
    """Draw the hierarchical roofline of every kernel in the report `df`; returns the Figure.

    With `ax`, draws into it (the unplotted-kernel list goes under that axes); otherwise makes a
    Figure of fixed size (`size`: width × height of the plot area in inches). Save it with `save()`
    for byte-identical SVG output. `point_links`: each point's SVG element is wrapped in a link to
    POINT_LINK + its kernel key in hex + its level (the HTML page turns them into tooltips). A report of
    several devices (a dataset) gets one panel per device, each against its own roofs."""
    devices = sorted({str(d) for d in df["device"].astype(str).unique()}) if "device" in df.columns else []
    if ax is None and len(devices) > 1:
        return _panels(df, devices, level=level, top=top, nvtx=nvtx, precision=precision, title=title,
                       point_links=point_links, size=size)
    with _rc():
        data = chart_data(df, level=level, top=top, nvtx=nvtx, precision=precision)
        roofs = roof_lines(df, level=level, nvtx=nvtx, precision=precision)
        ridges = ridge_points(df, level=level, nvtx=nvtx, precision=precision)
        missing = unplotted(data)
        noun = row_noun(df)
        lines = _unplotted_lines(missing, noun)
        if ax is None:
            from matplotlib.figure import Figure

            ax_w, ax_h = size or (_AX_W_IN, _AX_H_IN)
            fig_w = _FIG_W_IN - _AX_W_IN + ax_w
            listing_in = _LINE_IN * len(lines) + (0.2 if lines else 0.0)
            height_in = _TOP_IN + ax_h + _BOTTOM_IN + listing_in
            fig = Figure(figsize=(fig_w, height_in))
            ax = fig.add_axes((_AX_LEFT_IN / fig_w, (_BOTTOM_IN + listing_in) / height_in,
                               ax_w / fig_w, ax_h / height_in))
            if lines:
                fig.text(_AX_LEFT_IN / fig_w - 0.05, listing_in / height_in, "\n".join(lines), va="top",
                         ha="left", fontsize=8.0, linespacing=1.25)
        else:
            root = ax.get_figure(root=True)
            assert root is not None
            fig = root
            if lines:
                ax.text(0.0, -0.11, "\n".join(lines), transform=ax.transAxes, va="top", ha="left",
                        fontsize=8.0)
        _draw(ax, data, roofs, ridges, title=title or _title(data, level, nvtx, precision, noun),
              empty_text="The report has no kernels" if df.empty else f"No {noun} matches the filters",
              point_links=point_links, noun=noun)
    return fig


def _panels(df: pd.DataFrame, devices: list[str], *, size: tuple[float, float] | None, title: str | None,
            **options: Any) -> Figure:
    """One panel per device, stacked: each device's kernels against that device's roofs only."""
    from matplotlib.figure import Figure

    ax_w, ax_h = size or (_AX_W_IN, _AX_H_IN)
    fig_w = _FIG_W_IN - _AX_W_IN + ax_w
    panel_h = _TOP_IN + ax_h + _BOTTOM_IN + 0.5 + _LINE_IN * MAX_UNPLOTTED_LINES / 2
    with _rc():
        fig = Figure(figsize=(fig_w, panel_h * len(devices)))
        for i, device in enumerate(devices):
            bottom = (len(devices) - 1 - i) * panel_h + _BOTTOM_IN + 0.5 + _LINE_IN * MAX_UNPLOTTED_LINES / 2
            ax = fig.add_axes((_AX_LEFT_IN / fig_w, bottom / fig.get_figheight(), ax_w / fig_w,
                               ax_h / fig.get_figheight()))
            rows = df[df["device"].astype(str) == device]
            plot(rows, ax=ax, title=f"{title} — {device or 'unknown device'}" if title else None, **options)
    return fig


def _title(data: pd.DataFrame, level: str, nvtx: str | None, precision: str | None, noun: str = "kernel"
           ) -> str:
    n = data["key"].nunique()
    devices = sorted({d for d in data["device"].astype(str) if d})
    what = "Hierarchical roofline" if level == "all" else f"Roofline at {LEVEL_NAMES[level]}"
    text = f"{what}: {n} {noun}{'s' if n != 1 else ''}"
    if devices:
        text += " on " + ", ".join(devices[:3]) + (f" +{len(devices) - 3}" if len(devices) > 3 else "")
    filters = [f for f in (f"nvtx~{nvtx}" if nvtx else "", precision or "") if f]
    return text + (f" ({', '.join(filters)})" if filters else "")


def _unplotted_lines(missing: pd.DataFrame, noun: str = "kernel") -> list[str]:
    if missing.empty:
        return []
    lines: list[str] = []
    several_sources = missing["source"].nunique() > 1
    whole = missing[~missing["partial"]]
    part = missing[missing["partial"]]
    budget = MAX_UNPLOTTED_LINES
    for frame, head in (
        (whole, "Not plotted: {n} " + noun + "{s} ({share:.1f}% of the run's time)"),
        (part, "Points missing at some levels: {n} " + noun + "{s} ({share:.1f}% of the run's time)"),
    ):
        if frame.empty:
            continue
        share = float(np.nansum(frame["time_share"].astype("float64"))) * 100
        lines.append(head.format(n=len(frame), s="s" if len(frame) != 1 else "", share=share))
        shown = frame.head(max(budget, 1))
        for row in shown.itertuples():
            name = short_name(row.function or row.kernel_name, 40)
            where = f" [{row.source}]" if several_sources else ""
            lines.append(fit_name(f"  • #{row.kernel_id} {name}{where}: {row.reason}", LISTING_CHARS))
        budget -= len(shown)
        if len(frame) > len(shown):
            lines.append(f"  • … and {len(frame) - len(shown)} more (see the report's `missing` column)")
    return lines



def _draw(ax: Axes, data: pd.DataFrame, roofs: pd.DataFrame, ridges: pd.DataFrame, *, title: str,
          empty_text: str, point_links: bool = False, noun: str = "kernel") -> None:
    from matplotlib.collections import LineCollection
    from matplotlib.lines import Line2D

    x_lo, x_hi, y_lo, y_hi = limits(data, roofs, ridges)
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
    # a kernel's points at DRAM, L2 and L1 share one FLOP/s (y): one segment, lowest to highest x, joins them
    span = pts.groupby("key", sort=False).agg(x0=("x_intensity", "min"), x1=("x_intensity", "max"),
                                              y=("y_flop_per_s", "first"), n=("x_intensity", "size"))
    span = span[span["n"] > 1]
    segments = [((a, y), (b, y)) for a, b, y in zip(span["x0"], span["x1"], span["y"], strict=True)]
    rasterize = len(pts) > RASTERIZE_POINTS
    if segments:
        joins = LineCollection(segments, colors="#888888", linewidths=0.7, alpha=0.6, zorder=5,
                               rasterized=rasterize)
        if point_links and not rasterize:
            joins.set_urls([f"{POINT_LINK}{str(k).encode().hex()}-join" for k in span.index])
        ax.add_collection(joins)
    for lv in LEVEL_MARKERS:  # the memory levels, then a collective's link
        p = pts[pts["level"] == lv]
        if p.empty:
            continue
        dots = ax.scatter(p["x_intensity"], p["y_flop_per_s"], s=p["marker_area_pt2"], c=LEVEL_COLORS[lv],
                          marker=LEVEL_MARKERS[lv], alpha=0.72, edgecolors="white", linewidths=0.5, zorder=6,
                          rasterized=rasterize)
        if point_links and not rasterize:
            dots.set_urls([f"{POINT_LINK}{str(k).encode().hex()}-{lv}" for k in p["key"]])
    hot = pts[pts["above_roof"]]
    if len(hot):
        ax.scatter(hot["x_intensity"], hot["y_flop_per_s"], s=hot["marker_area_pt2"] * 1.5 + 40,
                   facecolors="none",
                   edgecolors=ABOVE_ROOF_COLOR, linewidths=1.6, zorder=7, rasterized=rasterize)
    place_labels(ax, pts, gid_prefix=LABEL_GID if point_links else None)
    handles: list[Any] = [
        Line2D([], [], marker=LEVEL_MARKERS[lv], linestyle="", markerfacecolor=LEVEL_COLORS[lv],
               markeredgecolor="white", markersize=7, label=f"{noun} at {LEVEL_NAMES[lv]}")
        for lv in LEVEL_MARKERS if (pts["level"] == lv).any()
    ]
    if segments:
        handles.append(Line2D([], [], color="#888888", linewidth=0.7, label=f"same {noun} across levels"))
    if len(hot):
        handles.append(Line2D([], [], marker="o", linestyle="", markerfacecolor="none",
                              markeredgecolor=ABOVE_ROOF_COLOR, markeredgewidth=1.6, markersize=9,
                              label="above a roof (>5%)"))
    if len(ridges):
        handles.append(Line2D([], [], marker="D", linestyle="", markerfacecolor="white",
                              markeredgecolor="#444444", markersize=5, label="ridge point"))
    for s, grp in roofs.groupby("ceiling_set", sort=True):
        first = grp.iloc[0]
        where = (" (per kernel, at the profiled clock)" if first["family"] == "ncu" else "")
        tag = f"[{int(s) + 1}] " if multi_set else ""
        handles.append(Line2D([], [], color="#555555", linestyle=SET_LINESTYLES[int(s) % len(SET_LINESTYLES)],
                              label=_wrap(f"{tag}roofs: {first['device'] or 'device ?'} · "
                                          f"{first['family']}{where}", 34)))
    if data.empty:
        ax.text(0.5, 0.5, empty_text, transform=ax.transAxes, ha="center", va="center",
                fontsize=11, color="#555555")
    elif roofs.empty:
        ax.text(1.02, 0.0, "No roofs: the report\nhas no ceilings\n(nsroof analyze\n--machine NAME|FILE)",
                transform=ax.transAxes, ha="left", va="bottom", fontsize=8.5, color=ABOVE_ROOF_COLOR)
    handles.append(Line2D([], [], linestyle="",
                          label=f"area ∝ share of time\n(all time = {AREA_PT2_PER_SHARE:g} pt²)"))
    ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False, borderaxespad=0.0)


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
            ax.plot([start, x_hi], [row.value_max, row.value_max], color=color, linestyle=style,
                    linewidth=1.6, zorder=3)
            if row.value_min != row.value_max:
                ax.fill_between([start, x_hi], row.value_min, row.value_max, color=color, alpha=0.15,
                                zorder=2, linewidth=0)
            ax.text(x_hi / 1.15, row.value_max * 1.06, _roof_label(row, "FLOP/s") + tag, ha="right",
                    va="bottom", fontsize=7.5, color=color, zorder=3)
        for row in bw.itertuples():
            stop = top_peak / row.value_max if np.isfinite(top_peak) else x_hi
            color = LEVEL_COLORS.get(row.name, "#333333")
            ax.plot([x_lo, stop], [row.value_max * x_lo, row.value_max * stop], color=color, linestyle=style,
                    linewidth=1.6, zorder=3)
            if row.value_min != row.value_max:
                ax.fill_between([x_lo, stop], [row.value_min * x_lo, row.value_min * stop],
                                [row.value_max * x_lo, row.value_max * stop], color=color, alpha=0.15,
                                zorder=2, linewidth=0)
            _bandwidth_label(ax, row, x_lo, stop, color, tag, slot=int(s))


def _roof_label(row: Any, unit: str) -> str:
    name = row.title
    value = si_range(row.value_min, row.value_max, unit)
    return f"{name} {value} · {short_source(row.family)}"


def _bandwidth_label(ax: Axes, row: Any, x_lo: float, stop: float, color: str, tag: str, *,
                     slot: int = 0) -> None:
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
    ax.text(x_at, y_at * 1.12, _roof_label(row, "B/s") + tag, rotation=angle, rotation_mode="anchor",
            ha="left", va="bottom", fontsize=7.5, color=color, zorder=3, clip_on=True)


# ------------------------------------------------------------------------------------------ output


FORMATS: tuple[str, ...] = ("png", "svg", "pdf")


def save(fig: Figure, path: str | os.PathLike[str], *, salt: str = "nsroof", dpi: int | None = None) -> Path:
    """Write `fig` atomically as PNG, SVG or PDF (from the suffix), with no timestamps and fixed SVG
    ids, so the same figure gives the same bytes (`dpi`: the PNG's resolution, default RC's)."""
    target = Path(path)
    fmt = target.suffix.lower().lstrip(".")
    if fmt not in FORMATS:
        raise NsroofError(f"{target}: cannot write a chart as {target.suffix or 'a file without suffix'!r}; "
                          f"use .png, .svg or .pdf")
    from nsroof.atomic import atomic_path

    with _rc(salt), atomic_path(target) as tmp:
        fig.savefig(tmp, format=fmt, metadata=_metadata(fmt), dpi=dpi if dpi else "figure")
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
