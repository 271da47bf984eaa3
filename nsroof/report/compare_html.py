"""`nsroof compare BEFORE AFTER --html OUT.html`: the comparison as one self-contained page, side by side.

The same Comparison the terminal prints (nsroof.report.compare: kernels or CPU ops matched by function + NVTX
path, normalised like with like) as HTML: the totals before and after (time, FLOPs, bytes per level), how
many kernels matched and how many are only on one side, the warnings, then one sortable table per kernel
(or op) — time, FLOPs, DRAM bytes and bound before and after, the change and the speedup — and one per NVTX
range (the modules of a profiled run). Styling and escaping are the report page's (nsroof.report.html); no
chart, no network, the same bytes for the same inputs.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from nsroof.report.compare import Comparison, describe_per
from nsroof.report.html_cells import PAGE_CSS, SORT_JS
from nsroof.report.html_cells import e as _e
from nsroof.report.html_cells import ntd as _ntd
from nsroof.report.html_cells import table as _table
from nsroof.report.html_cells import td as _td
from nsroof.report.wide import ROW_LEVELS
from nsroof.schema import LINK_LEVEL
from nsroof.units import human_bytes, human_si, human_time

#: rows of the per-kernel table, largest time change first (every row stays in the -o file)
MAX_ROWS = 2000

_EXTRA_CSS = """
.faster{color:#2a7a2a}.slower{color:#d62728}.side{color:#777;font-style:italic}
"""


def render(c: Comparison, *, before_name: str = "before", after_name: str = "after",
           title: str = "nsroof compare", max_rows: int | None = None) -> str:
    """The whole page as one string; the per-kernel table lists the `max_rows` largest time changes (None:
    MAX_ROWS; 0: every row)."""
    limit = MAX_ROWS if max_rows is None else max_rows
    noun = "op" if c.on_cpu else "kernel"
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>{_e(title)}</title><style>{PAGE_CSS}{_EXTRA_CSS}</style></head><body>",
        f"<h1>{_e(title)}</h1>",
        f"<p><b>before</b> {_e(before_name)} &rarr; <b>after</b> {_e(after_name)}</p>",
        _totals_section(c, noun),
        _kernel_section(c.kernels, noun, limit),
    ]
    if c.ranges is not None and len(c.ranges):
        parts.append(_range_section(c.ranges))
    parts.append(f"<script>{SORT_JS}document.querySelectorAll('table.sortable').forEach(function(t){{"
                 "sortable(t,'tr');});</script></body></html>")
    return "\n".join(parts) + "\n"


def write(c: Comparison, path: str | os.PathLike[str], **kwargs: Any) -> Path:
    """render() into `path`, atomically."""
    from nsroof.atomic import atomic_write_text

    atomic_write_text(path, render(c, **kwargs))
    return Path(path)


def _sum(frame: pd.DataFrame, column: str) -> float:
    return float(frame[column].sum(min_count=1)) if column in frame else float("nan")


def _totals_section(c: Comparison, noun: str) -> str:
    k = c.kernels
    status = k["status"].astype(str)
    counts = {s: int((status == s).sum()) for s in ("both", "removed", "added")}
    rows = [[_td(f"{noun}s matched (function + NVTX path)"), _td(str(counts["both"]), numeric=True),
             _td(str(counts["both"]), numeric=True), _td("")],
            [_td(f"{noun}s on one side only"), _td(f"{counts['removed']} only before", numeric=True),
             _td(f"{counts['added']} only after", numeric=True), _td("")]]
    quantities = [(f"{noun} time", "duration_s", human_time),
                  ("FLOPs", "flops", lambda v: human_si(v, "FLOP")),
                  *((f"{lv.upper()} bytes", f"bytes_{lv}", human_bytes) for lv in ROW_LEVELS)]
    for label, column, fmt in quantities:
        before, after = _sum(k, f"{column}_before"), _sum(k, f"{column}_after")
        if np.isnan(before) and np.isnan(after):
            continue  # a level neither report has (L2/L1 of a trace)
        rows.append([_td(label), _ntd(before, _text(before, fmt)), _ntd(after, _text(after, fmt)),
                     _change_td(before, after)])
    notes = [f"<li>normalised: {_e(describe_per(c))}</li>", *(f'<li class="warn">warning: {_e(w)}</li>'
                                                               for w in c.warnings)]
    return ("<h2>Totals</h2>" + _table(["", "before", "after", "speedup (before / after)"], rows)
            + f"<ul>{''.join(notes)}</ul>")


def _text(value: float, fmt: Any) -> str:
    return "—" if not np.isfinite(value) else str(fmt(value))


def _change_td(before: float, after: float) -> str:
    if not (np.isfinite(before) and np.isfinite(after)) or after == 0:
        return _ntd(float("nan"), "—")
    ratio = before / after
    cls = "faster" if ratio > 1.005 else "slower" if ratio < 0.995 else ""
    v = repr(float(ratio))
    return f'<td class="n {cls}" data-v="{_e(v)}">{ratio:.2f}x</td>'


def _bound(r: Any, side: str) -> str:
    lv = LINK_LEVEL if (pd.isna(r["bytes_dram_before"]) and pd.isna(r["bytes_dram_after"])
                        and not (pd.isna(r[f"bytes_{LINK_LEVEL}_before"])
                                 and pd.isna(r[f"bytes_{LINK_LEVEL}_after"]))) else "dram"
    text = str(r[f"bound_{lv}_{side}"] or "")
    return f"{text} (link)" if text and lv == LINK_LEVEL else text


def _kernel_section(k: pd.DataFrame, noun: str, limit: int) -> str:
    shown = k if limit <= 0 else k.head(limit)
    headers = [noun, "NVTX range", "status", "time before", "time after", "change", "speedup", "FLOPs before",
               "FLOPs after", "DRAM bytes before", "DRAM bytes after", "bound before", "bound after"]
    rows = []
    for _, r in shown.iterrows():
        bound_a, bound_b = _bound(r, "before"), _bound(r, "after")
        changed = bound_a in ("memory", "compute") and bound_b in ("memory", "compute") and bound_a != bound_b
        status = {"both": "matched", "removed": "only before", "added": "only after"}[str(r["status"])]
        path = str(r["nvtx_path"])  # its innermost range (the module of a profiled run); all of it on hover
        cells = [_td(str(r["function"]), cls="k"), _td(path.rsplit("/", 1)[-1], cls="k muted", title=path),
                 _td(status, cls="" if status == "matched" else "side"),
                 _ntd(r["duration_s_before"], _text(r["duration_s_before"], human_time)),
                 _ntd(r["duration_s_after"], _text(r["duration_s_after"], human_time)),
                 _ntd(r["delta_s"], _signed(r["delta_s"])),
                 _change_td(r["duration_s_before"], r["duration_s_after"]),
                 *(_ntd(r[f"flops_{s}"], _text(r[f"flops_{s}"], lambda v: human_si(v, "FLOP")))
                   for s in ("before", "after")),
                 *(_ntd(r[f"bytes_dram_{s}"], _text(r[f"bytes_dram_{s}"], human_bytes))
                   for s in ("before", "after")),
                 _td(bound_a, cls=bound_a), _td(bound_b, cls=f"{bound_b} warn" if changed else bound_b)]
        rows.append(cells)
    more = (f"<p>The {len(shown)} largest time changes of {len(k)} rows (every row: "
            "<code>nsroof compare … -o FILE.csv</code>).</p>" if len(shown) < len(k) else "")
    return (f"<h2>Per {noun}</h2><p>Largest time change first; click a header to sort. A bound in red "
            "changed between memory and compute.</p>" + more
            + '<div class="scroll">' + _table(headers, rows, cls="sortable").replace(
                "<table", '<table id="compare-kernels"', 1) + "</div>")


def _signed(v: float) -> str:
    if not np.isfinite(v):
        return "—"
    return ("+" if v > 0 else "-" if v < 0 else "±") + human_time(abs(float(v)))


def _range_section(ranges: pd.DataFrame) -> str:
    headers = ["NVTX range (module)", "time before", "time after", "change", "speedup", "memory-bound before",
               "memory-bound after"]
    rows = []
    for _, r in ranges.iterrows():
        indent = "\u00a0\u00a0" * (int(r["depth"]) - 1)
        rows.append([_td(indent + str(r["nvtx_range"]).split("/")[-1], cls="k", title=str(r["nvtx_range"])),
                     _ntd(r["duration_s_before"], _text(r["duration_s_before"], human_time)),
                     _ntd(r["duration_s_after"], _text(r["duration_s_after"], human_time)),
                     _ntd(r["delta_s"], _signed(r["delta_s"])),
                     _change_td(r["duration_s_before"], r["duration_s_after"]),
                     *(_ntd(r[f"memory_bound_share_{s}"], _share(r[f"memory_bound_share_{s}"]))
                       for s in ("before", "after"))])
    return ("<h2>Per NVTX range</h2><p>Every range with the kernels below it (the modules of a profiled "
            "run); memory-bound: the share of its time memory-bound at DRAM.</p>"
            + '<div class="scroll">' + _table(headers, rows, cls="sortable").replace(
                "<table", '<table id="compare-ranges"', 1) + "</div>")


def _share(v: float) -> str:
    return "—" if not np.isfinite(v) else f"{100 * float(v):.0f}%"
