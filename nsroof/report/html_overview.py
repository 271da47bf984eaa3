"""The HTML page's first screen: where the time went (categories, the steps, prefill vs decode) and the ops
and modules that hold it, each with its bound and headroom; then the per-op and per-module tables in full
(capped), with their shapes and modules. The tables are nsroof.report.breakdown's, as the summary's."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from nsroof.report import breakdown
from nsroof.report.chart_data import row_noun
from nsroof.report.html_cells import e, pct, table, td
from nsroof.units import human_time

#: rows of the per-op and per-module tables below the overview (the Parquet report holds every row)
MAX_AGGREGATE_ROWS = 300


def _ratio(value: float) -> str:
    return f"{value:.3g}×" if np.isfinite(value) else "—"


def _bound(r: Any) -> str:
    bound = str(r["bound"])
    if not bound:
        return td("(copy/set)", cls="muted")
    share = float(r["bound_time_share"])
    text = bound if not (np.isfinite(share) and share < 0.995) else f"{bound} {share:.0%}"
    return td(text, cls=bound)


def _time_cells(r: Any) -> list[str]:
    return [td(str(int(r["kernels"])), numeric=True), td(human_time(float(r["duration_s"])), numeric=True),
            td(pct(float(r["time_share"])), numeric=True), _bound(r),
            td(_ratio(float(r["headroom"])), numeric=True,
               title="Σ duration_s / Σ time_floor_s over the rows with a roofline floor")]


def time_headers(noun: str) -> list[str]:
    """The headers of _time_cells; `noun`: what the rows time (chart_data.row_noun: 'op' on a CPU)."""
    return [f"{noun}s", "time", "share", "bound", "headroom"]


def _categories(df: pd.DataFrame) -> str:
    t = breakdown.category_table(df)
    rows = [[td(str(r["category"])), *_time_cells(r)] for _, r in t.iterrows()]
    total = float(t["duration_s"].sum())
    return (f"<h3>Time by category</h3><p>Σ {e(human_time(total))}, the run's time. Bound: that of most of "
            "the category's time at its limiting level; headroom: Σ time / Σ roofline floor.</p>"
            + table(["category", *time_headers(row_noun(df))], rows))


def _steps(metadata: dict[str, Any]) -> str:
    t = breakdown.step_table(metadata)
    if t.empty:
        return ""
    gpu = bool(t["gpu_busy_s"].notna().any())
    heads = ["source", "step", "wall", "in ops", "outside ops", "share", "waits", "between ops", "DataLoader",
             *(["GPU busy", "GPU idle"] if gpu else [])]
    rows = []
    for _, r in t.head(50).iterrows():
        def times(*names: str, r: Any = r) -> list[str]:
            return [td(human_time(float(r[c])), numeric=True) for c in names]

        label = breakdown.step_label(str(r["step"]), 40)
        cells = [td(str(r["source"])), td(label, title=str(r["step"])),
                 *times("wall_s", "op_s", "outside_ops_s"),
                 td(pct(float(r["outside_ops_share"])), numeric=True),
                 *times("waits_s", "between_ops_s", "dataloader_s")]
        if gpu:
            cells += times("gpu_busy_s", "gpu_idle_s")
        rows.append(cells)
    more = f" (the first 50 of {len(t)})" if len(t) > 50 else ""
    return (f"<h3>Step time accounted{more}</h3><p>Outside ops: no op running (waits: gaps of 1 ms or more; "
            "between ops: shorter gaps, launch overhead and Python); GPU busy: kernels, copies and sets, "
            "overlapping streams counted once.</p>" + table(heads, rows))


def _phases(df: pd.DataFrame) -> str:
    t = breakdown.phase_table(df)
    if t.empty:
        return ""
    rows = [[td(str(r["phase"])), *_time_cells(r), td(f"{r['gemm_intensity']:.3g}", numeric=True),
             td(f"{r['gemm_ridge']:.3g}", numeric=True),
             td("—" if not np.isfinite(r["batch_to_leave_memory_bound"])
                else f"{r['batch_to_leave_memory_bound']:.0f}", numeric=True)]
            for _, r in t.iterrows()]
    return ("<h3>Prefill vs decode</h3><p>GEMM FLOP/B: Σ FLOPs / Σ DRAM bytes of the phase's GEMMs; the "
            "decode batch that leaves the memory-bound regime = tokens per step × ridge / GEMM intensity.</p>"
            + table(["phase", *time_headers(row_noun(df)), "GEMM FLOP/B", "ridge",
                     "batch to leave memory-bound"], rows))


def _ops(t: pd.DataFrame, limit: int, noun: str) -> str:
    rows = [[td(str(r["op"]), cls="k"), td(str(r["input_shapes"]), cls="shape"),
             td(str(r["module"]), cls="k"), td(str(r["category"])), *_time_cells(r)]
            for _, r in t.head(limit).iterrows()]
    return table(["op", "input shapes", "module", "category", *time_headers(noun)], rows)


def _modules(t: pd.DataFrame, limit: int, noun: str) -> str:
    rows = [[td(str(r["module"]), cls="k"), td(str(r["category"])), *_time_cells(r)]
            for _, r in t.head(limit).iterrows()]
    return table(["module", f"category of its longest {noun}", *time_headers(noun)], rows)


def overview(df: pd.DataFrame, metadata: dict[str, Any], *, top: int = 10) -> str:
    """The page's first section (id "overview")."""
    ops, modules, noun = breakdown.op_table(df), breakdown.module_table(df), row_noun(df)
    parts = ['<section id="overview"><h2>Overview</h2>', _categories(df), _steps(metadata), _phases(df),
             f"<h3>Top {min(top, len(ops))} ops by time</h3>" + _ops(ops, top, noun)]
    if len(modules):
        parts.append(f"<h3>Top {min(top, len(modules))} modules by time</h3>" + _modules(modules, top, noun))
    return "".join(parts) + "</section>"


def aggregates(df: pd.DataFrame) -> str:
    """The per-op (and shape) and per-module tables, each capped at MAX_AGGREGATE_ROWS."""
    ops, modules, noun = breakdown.op_table(df), breakdown.module_table(df), row_noun(df)
    cap = (f"<p class='muted'>The {MAX_AGGREGATE_ROWS} longest of {len(ops)} shown.</p>"
           if len(ops) > MAX_AGGREGATE_ROWS else "")
    text = (f'<h2 id="ops">Ops by time ({len(ops)} op and shape pairs)</h2>{cap}<div class="scroll">'
            + _ops(ops, MAX_AGGREGATE_ROWS, noun) + "</div>")
    if len(modules):
        text += (f'<h2 id="modules">Modules by time ({len(modules)})</h2><div class="scroll">'
                 + _modules(modules, MAX_AGGREGATE_ROWS, noun) + "</div>")
    return text
