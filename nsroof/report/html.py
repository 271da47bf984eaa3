"""One self-contained HTML page for a report: run summary, roofline charts as inline SVG, and a sortable,
filterable table of kernels grouped by NVTX path.

Nothing on the page is fetched: CSS and the small sorting/filtering script are inline, charts are SVG
text. Every string from the report is HTML-escaped (kernel names carry <, > and &). The page is a pure
function of the report and its metadata: same input, same bytes.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from nsroof.report import chart_data, html_overview, plots
from nsroof.report.chart_data import LEVEL_NAMES, precision_name, row_noun
from nsroof.report.html_cells import PAGE_CSS, SORT_JS
from nsroof.report.html_cells import e as _e
from nsroof.report.html_cells import ntd as _ntd
from nsroof.report.html_cells import pct as _pct
from nsroof.report.html_cells import table as _table
from nsroof.report.html_cells import td as _td
from nsroof.report.wide import LEDGER_COLUMNS, kernel_rows
from nsroof.report.wide import as_float as _num
from nsroof.schema import BOUNDS, LEVELS, cpu_ops_only, kernel_key
from nsroof.units import human_si, human_si_range, human_time

# ------------------------------------------------------------------------------------------ data


def group_path(nvtx_path: str) -> str:
    """The NVTX path a kernel is grouped under: each range name without emit_nvtx's ', seq = …,
    op_id = …, sizes = …, input_op_ids = …' fields (the full path stays on the row). The same helper
    keys `nsroof compare`, which keeps the sizes."""
    from nsroof.names.nvtx_paths import stable_nvtx_path

    return stable_nvtx_path(nvtx_path, keep_sizes=False)


def ledger_ran(df: pd.DataFrame) -> bool:
    """The measured-vs-compulsory join filled at least one kernel (ledger columns non-null)."""
    if "ledger_op" in df.columns and (
            df["ledger_op"].astype(str).replace({"nan": "", "<NA>": ""}) != "").any():
        return True
    return any(c in df.columns and df[c].astype("float64").notna().any() for c in LEDGER_COLUMNS[1:])


def bound_shares(df: pd.DataFrame) -> pd.DataFrame:
    """Per level, the share of the run's time (Σ duration_s of all kernels) spent memory-, compute-bound
    or unknown at that level. Rows: levels present; columns: BOUNDS."""
    k = chart_data.kernels(df)
    total_s = float(np.nansum(k["duration_s"].to_numpy(float)))
    key = kernel_key(df)
    rows = df.assign(_key=key.to_numpy()).drop_duplicates(["_key", "level"])
    out = {}
    for level in [lv for lv in LEVELS if (rows["level"].astype(str) == lv).any()]:
        at = rows[rows["level"].astype(str) == level]
        by = at.groupby(at["bound"].astype(str))["duration_s"].sum(min_count=1)
        out[level] = {b: (float(by.get(b, 0.0)) / total_s if total_s > 0 else np.nan) for b in BOUNDS}
    return pd.DataFrame.from_dict(out, orient="index", columns=list(BOUNDS))


# ---------------------------------------------------------------------------------------- render




# Sorting sorts rows inside each NVTX group; filtering hides rows and empty groups.
_JS = """
(function(){
var table=document.getElementById('kernels');if(!table)return;
var heads=table.tHead.rows[0].cells,groups=table.tBodies;
sortable(table,'tr.kernel');
var text=document.getElementById('filter'),bound=document.getElementById('bound');
function apply(){var q=text.value.toLowerCase(),b=bound.value,shown=0;
 Array.prototype.forEach.call(groups,function(tb){var n=0;
  tb.querySelectorAll('tr.kernel').forEach(function(r){
   var ok=(!q||r.getAttribute('data-text').indexOf(q)>=0)&&(!b||r.getAttribute('data-bound')===b);
   r.hidden=!ok;if(ok)n++;});
  tb.hidden=n===0;var c=tb.querySelector('.count');if(c)c.textContent=n;shown+=n;});
 document.getElementById('shown').textContent=shown;
 // the charts follow the table: a point is shown when its kernel's row is (a kernel the table does not
 // list: when no filter is set)
 points.forEach(function(p){var r=byRank[p.getAttribute('data-k')];
  p.style.display=(r?!r.hidden:!q&&!b)?'':'none';});}
var points=Array.prototype.slice.call(document.querySelectorAll('.pt')),byRank={};
table.querySelectorAll('tr.kernel').forEach(function(r){byRank[r.getAttribute('data-k')]=r;});
points.forEach(function(p){p.addEventListener('click',function(){var r=byRank[p.getAttribute('data-k')];\
if(!r)return;
 document.getElementById('calls').open=true;
 table.querySelectorAll('tr.hl').forEach(function(h){h.classList.remove('hl');});
 r.classList.add('hl');r.scrollIntoView({block:'center'});});});
text.addEventListener('input',apply);bound.addEventListener('change',apply);
// a link may carry the filter (report.html#q=gemm&bound=memory)
var h=new URLSearchParams(location.hash.slice(1));
if(h.has('q'))text.value=h.get('q');if(h.has('bound'))bound.value=h.get('bound');apply();
if(h.has('q')||h.has('bound')||h.has('sort'))document.getElementById('calls').open=true;
// ...and a sort: #sort=duration&dir=desc
if(h.has('sort'))Array.prototype.forEach.call(heads,function(th){if(th.textContent===h.get('sort')){
 th.click();if(h.get('dir')==='desc')th.click();}});
})();
"""


def _svg_inline(svg: str, prefix: str) -> str:
    """matplotlib's SVG minus the XML prolog, doctype and RDF metadata block, with every id (and every
    in-document reference to one) prefixed, so several charts on one page never share an id."""
    svg = re.sub(r"^\s*<\?xml[^>]*\?>\s*", "", svg)
    svg = re.sub(r"<!DOCTYPE[^>]*>\s*", "", svg)
    svg = re.sub(r"\s*<metadata>.*?</metadata>", "", svg, flags=re.S)
    svg = re.sub(r'\bid="([^"]+)"', lambda m: f'id="{prefix}-{m.group(1)}"', svg)
    svg = re.sub(r'((?:xlink:)?href="#|url\(#)([^")]+)', lambda m: f"{m.group(1)}{prefix}-{m.group(2)}", svg)
    return svg.strip()


def charts(df: pd.DataFrame, *, top: int = 10, k: pd.DataFrame | None = None) -> list[tuple[str, str]]:
    """(caption, inline SVG) per device: the hierarchical chart, then one chart per level — just the one
    level's chart when the report has a single level (a CPU profile: DRAM only). Every point is an SVG
    element with a tooltip (kernel, id, level, intensity, FLOP/s, roof %) and `data-k` = its kernel's
    rank, which the table's filter uses to hide it. Each chart has its own SVG id salt."""
    k = kernel_rows(df) if k is None else k
    ranks = {str(key).encode().hex(): int(rank) for key, rank in zip(k["key"], k["rank"], strict=True)}
    devices = sorted({str(d) for d in df["device"].astype(str).unique()}) or [""]
    out = []
    for n, device in enumerate(devices):
        rows = df[df["device"].astype(str) == device] if len(devices) > 1 else df
        present = [lv for lv in LEVELS if (rows["level"].astype(str) == lv).any()]
        on = f" — {device or 'unknown device'}" if len(devices) > 1 else ""
        for level in (["all", *present] if len(present) > 1 else present or ["all"]):
            fig = plots.plot(rows, level=level, top=top, point_links=True)
            caption = (f"All levels: each {row_noun(rows)}'s points at "
                       + ", ".join(LEVEL_NAMES[lv] for lv in present)
                       + " share one FLOP/s and are joined" if level == "all"
                       else f"{LEVEL_NAMES[level]} only") + on
            svg = plots.to_svg(fig, salt=f"nsroof-{n}-{level}")
            # tooltips for the points the chart links (none when its points are rasterized)
            svg = _link_points(svg,
                               _point_tips(k, {(m.group(1), m.group(2)) for m in _POINT_HREF.finditer(svg)}),
                               ranks)
            out.append((caption, _svg_inline(svg, f"chart-{n}-{level}")))
    return out


#: kernels listed in the page's table by default, longest first: a real run's tens of thousands of launches
#: would make a page of hundreds of MB that no browser opens (the Parquet report keeps every kernel)
MAX_TABLE_ROWS = 200


_POINT_HREF = re.compile(r'<a xlink:href="' + re.escape(plots.POINT_LINK) + r'([0-9a-f]*)-(\w+)"[^>]*>')


def _point_tips(k: pd.DataFrame, wanted: set[tuple[str, str]]) -> dict[tuple[str, str], tuple[int, str]]:
    """(kernel key in hex, level) -> (rank, tooltip) for the pairs in `wanted` of the kernels
    of `kernel_rows`."""
    tips: dict[tuple[str, str], tuple[int, str]] = {}
    if not wanted:
        return tips
    shown = {hex_key for hex_key, _ in wanted}
    for hex_key, r in zip((str(key).encode().hex() for key in k["key"]), k.itertuples(), strict=True):
        if hex_key not in shown:
            continue
        name = r.function if isinstance(r.function, str) and r.function else r.kernel_name
        for lv in LEVELS:
            if (hex_key, lv) not in wanted:
                continue
            bound = getattr(r, f"bound_{lv}") or "unknown"
            text = (f"{r.rank}. {name} (id {r.kernel_id}) at {LEVEL_NAMES[lv]}: {bound}-bound, "
                    f"intensity {_per_byte(_num(getattr(r, f'intensity_{lv}')))}, "
                    f"{human_si(_num(getattr(r, f'achieved_flop_per_s_{lv}')), 'FLOP/s')}, "
                    f"{_pct(_num(getattr(r, f'roof_fraction_{lv}')))} of the roof; "
                    f"{human_time(_num(r.duration_s))} ({_pct(_num(r.time_share))} of the time)")
            tips[(hex_key, lv)] = (int(r.rank), text)
    return tips


_LABEL_ID = re.compile(r'<g id="' + re.escape(plots.LABEL_GID) + r'([0-9a-f]*)"')


def _link_points(svg: str, tips: dict[tuple[str, str], tuple[int, str]], ranks: dict[str, int]) -> str:
    """The chart's point links (plots.POINT_LINK) replaced by the kernel's rank and an SVG tooltip, and
    its label groups (plots.LABEL_GID) marked with the rank (`ranks`: kernel key in hex -> rank), so the
    filter hides them with the points."""

    def point(m: re.Match[str]) -> str:
        if m.group(2) == "join":  # the segment joining a kernel's levels: hidden with its points
            return f'<a class="pt" data-k="{ranks.get(m.group(1), 0)}">'
        rank, text = tips.get((m.group(1), m.group(2)), (0, ""))
        return f'<a class="pt" data-k="{rank}"><title>{_e(text)}</title>'

    svg = _LABEL_ID.sub(lambda m: f'<g class="pt lbl" data-k="{ranks.get(m.group(1), 0)}"', svg)
    return _POINT_HREF.sub(point, svg)


def render(df: pd.DataFrame, *, metadata: dict[str, Any] | None = None, title: str = "nsroof report",
           top: int = 10, with_charts: bool = True, max_rows: int | None = None) -> str:
    """The whole page as one string; its table lists the `max_rows` longest kernels (None: MAX_TABLE_ROWS;
    0: every kernel)."""
    metadata = metadata or {}
    missing_cols = chart_data.check_columns(df)
    if missing_cols:
        from nsroof.errors import NsroofError

        raise NsroofError(f"the report lacks columns {', '.join(missing_cols)}: write it with nsroof analyze")
    k = kernel_rows(df)
    noun = row_noun(df)
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>{_e(title)}</title><style>{PAGE_CSS}</style></head><body>",
        f"<h1>{_e(title)}</h1>",
        html_overview.overview(df, metadata, top=top),
        _run_section(df, k, metadata),
        _ceilings_section(df, metadata),
        _bounds_section(df),
    ]
    if with_charts:
        parts.append(f"<h2>Roofline charts</h2><p>Hover a point for its {noun}; the table's filter below "
                     "also filters the charts; click a point to find its row.</p>")
        parts += [f'<figure class="chart">{svg}<figcaption>{_e(caption)}</figcaption></figure>'
                  for caption, svg in charts(df, top=top, k=k)]
    parts.append(html_overview.aggregates(df))
    parts.append(_table_section(df, k, MAX_TABLE_ROWS if max_rows is None else max_rows))
    parts.append(f"<script>{SORT_JS}{_JS}</script></body></html>")
    return "\n".join(parts) + "\n"


def write(df: pd.DataFrame, path: str | os.PathLike[str], **kwargs: Any) -> Path:
    """render() into `path`, atomically."""
    from nsroof.atomic import atomic_write_text

    atomic_write_text(path, render(df, **kwargs))
    return Path(path)


def _per_byte(value: float, unit: str = " FLOP/B") -> str:
    """An arithmetic intensity, 3 significant digits and no SI prefix (0.607 FLOP/B reads better
    than 607 m)."""
    return "—" if not np.isfinite(value) else f"{value:.3g}{unit}"


def _run_section(df: pd.DataFrame, k: pd.DataFrame, metadata: dict[str, Any]) -> str:
    total_s = float(np.nansum(k["duration_s"].to_numpy(float)))
    above = int(k["above_roof"].sum())
    noun = row_noun(df)
    lines = [
        "<h2>Run</h2><p>",
        f"{len(k)} {noun}{'s' if len(k) != 1 else ''}, total {noun} time {_e(human_time(total_s))} "
        f"(Σ duration_s), {len(df)} report rows ({noun} × level).",
    ]
    version = metadata.get("nsroof_version")
    if version:
        lines.append(f" Written by nsroof {_e(version)}, schema {_e(metadata.get('schema_version', '?'))}.")
    lines.append("</p>")
    if above:
        lines.append(f'<p class="warn">{above} {noun}{"s" if above != 1 else ""} run above a roof by more '
                     "than 5%: a counting or unit error in the export or a wrong ceiling (see the ⚠ "
                     "column).</p>")
    inputs = metadata.get("inputs") or []
    if inputs:
        rows = [[_td(i.get("name", "")), _td(str(i.get("sha256", ""))[:16], title=i.get("sha256", ""))]
                for i in inputs if isinstance(i, dict)]
        lines.append("<h3>Inputs</h3>" + _table(["file", "sha256 (first 16)"], rows))
    dev = k.assign(device=k["device"].astype(str), cc=k.get("cc", pd.Series("", index=k.index)).astype(str))
    agg = dev.groupby(["device", "cc"], sort=True).agg(kernels=("key", "count"),
                                                       time_s=("duration_s", lambda s: float(np.nansum(s))))
    rows = [[_td(r.device or "(unknown device)"), _td(r.cc), _td(str(int(r.kernels)), numeric=True),
             _td(_pct(r.time_s / total_s if total_s > 0 else np.nan), numeric=True)]
            for r in agg.reset_index().itertuples()]
    lines.append("<h3>Devices</h3>" + _table(["device", "cc", f"{noun}s", "share of time"], rows))
    return "".join(lines)


def _ceilings_section(df: pd.DataFrame, metadata: dict[str, Any]) -> str:
    roofs = chart_data.roof_lines(df)
    rows = []
    for r in roofs.itertuples():
        unit = "FLOP/s" if r.kind == "compute" else "B/s"
        value = human_si(r.value_max, unit) if r.value_min == r.value_max else human_si_range(
            r.value_min, r.value_max, unit)
        rows.append([_td(r.device), _td(r.kind), _td(r.title),
                     _td(value, numeric=True, title=f"{human_si(r.value_min, unit, digits=6)} … "
                         f"{human_si(r.value_max, unit, digits=6)}"), _td(r.source, cls="k"),
                     _td(str(r.n_kernels), numeric=True)])
    noun = row_noun(df)
    text = (f"<h2>Ceilings</h2><p>The roofs every {noun} was classified against, from the report's "
            "<code>peak_flop_per_s</code>, <code>bandwidth_bytes_per_s</code> and "
            "<code>ceiling_source</code> columns (a range where the export gave per-kernel roofs at the "
            "profiled clock).</p>")
    headers = ["device", "roof", "precision / level", "value", "source", f"{noun}s"]
    text += _table(headers, rows) if rows else ("<p class='muted'>No ceilings in this report: every verdict "
                                                 "is unknown (pass --machine to nsroof analyze).</p>")
    # a machine's figures are cited whether used at boost or at the profiled clock ('spec:X @ 765 MHz SM')
    used = {chart_data.source_family(s).partition(" @ ")[0]
            for src in df["ceiling_source"].astype(str).unique()
            for s in chart_data.split_ceiling_source(src)}
    cites = []
    for m in metadata.get("ceilings") or []:
        if not isinstance(m, dict) or m.get("label") not in used:
            continue
        for what, source in sorted((m.get("sources") or {}).items()):
            cites.append([_td(m.get("label", "")), _td(what), _td(source, cls="k")])
    if cites:
        text += "<h3>Sources of the machine figures</h3>" + _table(["ceiling", "figure", "source"], cites)
    return text


def _bounds_section(df: pd.DataFrame) -> str:
    shares = bound_shares(df)
    rows = [[_td(LEVEL_NAMES.get(str(lv), str(lv)))] + [_td(_pct(shares.at[lv, b]), numeric=True, cls=b)
                                                                for b in BOUNDS]
            for lv in shares.index]
    noun = row_noun(df)
    return (f"<h2>Share of time per bound</h2><p>Σ duration_s of the {noun}s with each verdict at each "
            f"level, over the run's total {noun} time.</p>" + _table(["level", *BOUNDS], rows))


def present_levels(df: pd.DataFrame) -> list[str]:
    """The memory levels the report has rows at (a CPU profile or a trace: DRAM only): the page shows no
    column for a level it has nothing at."""
    have = set(df["level"].astype(str).unique())
    return [lv for lv in LEVELS if lv in have] or [LEVELS[0]]


def _table_section(df: pd.DataFrame, k: pd.DataFrame, max_rows: int) -> str:
    ledger = ledger_ran(df)
    levels = present_levels(df)
    noun = row_noun(df)
    cols: list[tuple[str, str]] = [
        ("#", "rank by duration, longest first"),
        (noun, f"short function name (hover: the {noun} name as the profiler printed it)"),
        ("source", "input file"), ("id", "kernel_id"), ("launches", "launches merged into this row"),
        ("duration", "duration_s"), ("share", "duration_s / Σ duration_s of the run"),
        ("precision", "precision carrying most FLOPs"),
        *[(f"{LEVEL_NAMES[lv]}", f"bound at {LEVEL_NAMES[lv]} (hover: intensity, ridge, roof fraction)")
          for lv in levels],
        ("limiting", "level with the largest time floor (compute: the compute floor is the largest)"),
        ("roof %", "roof_fraction at the limiting level: achieved / attainable"),
        ("intensity", "FLOP per DRAM byte (hover: every level)"),
        ("FLOP/s", "achieved_flop_per_s = flops / duration_s"),
        ("DRAM B/s", "achieved_bytes_per_s at DRAM = bytes / duration_s"),
        ("time floor", "max over levels of max(flops / peak_flop_per_s, bytes / bandwidth_bytes_per_s)"),
        ("× floor", f"duration_s / time floor: how far above its roofline floor the {noun} ran"),
        ("headroom", "duration_s / ideal_time_s from the ledger join (— when no ledger formula matched)"),
    ]
    if ledger:
        cols += [("excess traffic", "DRAM bytes / compulsory bytes (ledger)"),
                 ("ledger op", "ledger formula matched")]
    cols += [("⚠", "achieved exceeds a roof by more than 5%"),
             ("missing", "metrics whose absence left values NaN")]

    groups: dict[str, list[str]] = {}
    group_time: dict[str, float] = {}
    cpu = cpu_ops_only(df)
    total_s = float(np.nansum(k["duration_s"].to_numpy(float)))
    listed = k.head(max_rows) if 0 < max_rows < len(k) else k  # kernel_rows: longest first
    for r in listed.itertuples():
        path = group_path(str(r.nvtx_path) if isinstance(r.nvtx_path, str) else "")
        groups.setdefault(path, []).append(_kernel_row(r, ledger, levels, cpu))
        group_time[path] = group_time.get(path, 0.0) + (0.0 if not np.isfinite(r.duration_s)
                                                        else r.duration_s)
    order = sorted(groups, key=lambda p: (-group_time[p], p))
    head = "".join(f'<th title="{_e(t)}">{_e(c)}</th>' for c, t in cols)
    bodies = []
    for path in order:
        share = group_time[path] / total_s if total_s > 0 else np.nan
        label = _e(path) if path else '<span class="muted">(no NVTX range)</span>'
        bodies.append(
            f'<tbody><tr class="group"><th colspan="{len(cols)}">{label} — <span class="count">'
            f"{len(groups[path])}</span> {noun}(s), {_e(_pct(share))} of time</th></tr>"
            + "".join(groups[path]) + "</tbody>")
    controls = (
        '<div class="controls"><label>Filter '
        '<input id="filter" type="search" placeholder="name, source, NVTX…"></label>'
        '<label>Bound at the limiting level <select id="bound"><option value="">any</option>'
        + "".join(f'<option value="{b}">{b}</option>' for b in BOUNDS)
        + f'</select></label><span><span id="shown">{len(listed)}</span> of {len(k)} {noun}s shown</span>'
          '</div>')
    cut = ""
    if len(listed) < len(k):
        listed_s = float(np.nansum(listed["duration_s"].to_numpy(float)))
        cut = (f"<p>The {len(listed):,} longest of the report's {len(k):,} {noun}s are listed "
               f"({_e(_pct(listed_s / total_s if total_s > 0 else np.nan))} of the {noun} time), and the "
               f"filter searches them; the charts show every {noun} and the Parquet report holds every row "
               "(<code>nsroof report --rows 0</code> lists them all).</p>")
    # every call is detail below the aggregates: folded, and capped (MAX_TABLE_ROWS), so the page stays small
    return (f'<details id="calls"><summary><h2>Every {noun} ({len(listed):,} of {len(k):,} listed)</h2>'
            "</summary><p>Grouped by NVTX path (longest group first; PyTorch's <code>seq</code> / "
            "<code>op_id</code> counters left out, hover a row for its full path); click a column to sort "
            "within the groups.</p>" + cut + controls
            + f'<div class="scroll"><table id="kernels" class="sortable"><thead><tr>{head}</tr></thead>'
            + "".join(bodies)
            + "</table></div></details>")


def _kernel_row(r: Any, ledger: bool, levels: list[str], cpu: bool) -> str:
    name = r.function if isinstance(r.function, str) and r.function else r.kernel_name
    cells = [
        _ntd(float(r.rank), str(r.rank)),
        f'<td class="k" title="{_e(r.kernel_name)}">{_e(name)}</td>',
        _td(str(r.source)),
        _ntd(_num(r.kernel_id), str(r.kernel_id)),
        _ntd(_num(r.launches), "" if pd.isna(r.launches) else str(r.launches)),
        _ntd(_num(r.duration_s), human_time(_num(r.duration_s))),
        _ntd(_num(r.time_share), _pct(_num(r.time_share))),
        _td(precision_name(r.precision, cpu) if isinstance(r.precision, str) else ""),
    ]
    for lv in levels:
        b = getattr(r, f"bound_{lv}") or ""
        tip = (f"intensity {_per_byte(_num(getattr(r, f'intensity_{lv}')))}, "
               f"ridge {_per_byte(_num(getattr(r, f'ridge_{lv}')))}, "
               f"roof fraction {_pct(_num(getattr(r, f'roof_fraction_{lv}')))}")
        cells.append(f'<td class="{_e(b)}" title="{_e(tip)}">{_e(b)}</td>')
    limiting = str(r.limiting) if isinstance(r.limiting, str) else ""
    first = LEVELS[0]
    intensities = ", ".join(f"{LEVEL_NAMES[lv]} {_per_byte(_num(getattr(r, f'intensity_{lv}')))}"
                            for lv in levels)
    cells += [
        _td(LEVEL_NAMES.get(limiting, limiting)),
        _ntd(_num(r.roof_fraction), _pct(_num(r.roof_fraction))),
        _ntd(_num(getattr(r, f"intensity_{first}")),
             _per_byte(_num(getattr(r, f"intensity_{first}")), unit=""), title=intensities),
        _ntd(_num(getattr(r, f"achieved_flop_per_s_{first}")),
             human_si(_num(getattr(r, f"achieved_flop_per_s_{first}")), "FLOP/s")),
        _ntd(_num(getattr(r, f"achieved_bytes_per_s_{first}")),
             human_si(_num(getattr(r, f"achieved_bytes_per_s_{first}")), "B/s")),
        _ntd(_num(r.time_floor_s), human_time(_num(r.time_floor_s))),
        _ntd(_num(r.floor_ratio), "—" if not np.isfinite(_num(r.floor_ratio)) else f"{r.floor_ratio:.2f}×"),
        _ntd(_num(r.headroom), "—" if not np.isfinite(_num(r.headroom)) else f"{r.headroom:.2f}×"),
    ]
    if ledger:
        cells.append(_ntd(_num(r.excess_traffic),
                          "—" if not np.isfinite(_num(r.excess_traffic)) else f"{r.excess_traffic:.2f}×"))
        cells.append(_td(str(r.ledger_op) if isinstance(r.ledger_op, str) else ""))
    cells.append(_td("⚠" if r.above_roof else "", cls="warn" if r.above_roof else ""))
    missing = str(r.missing) if isinstance(r.missing, str) else ""
    cells.append(_td(missing, cls="k muted", title=missing or None))
    text = " ".join(str(x) for x in (name, r.kernel_name, r.source, r.nvtx_path, r.kernel_id)).lower()
    bound = str(r.bound) if isinstance(r.bound, str) and r.bound else "unknown"
    nvtx = str(r.nvtx_path) if isinstance(r.nvtx_path, str) else ""
    title = f' title="NVTX: {_e(nvtx)}"' if nvtx else ""
    return (f'<tr class="kernel" data-k="{r.rank}" data-bound="{_e(bound)}" data-text="{_e(text)}"{title}>'
            + "".join(cells)
            + "</tr>")
