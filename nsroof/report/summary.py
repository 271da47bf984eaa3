"""The terminal summary of a report: where the time goes, what bounds it, and what could not be classified."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from nsroof.schema import LEVELS
from nsroof.units import human_time


def _short(text: str, width: int) -> str:
    text = str(text)
    return text if len(text) <= width else text[: width - 1] + "…"


def _cell(bound: str, fraction: float) -> str:
    if bound == "unknown":
        return "unknown"
    frac = f" {fraction:.0%}" if np.isfinite(fraction) else ""
    return f"{bound}{frac}"


def per_kernel(frame: pd.DataFrame) -> pd.DataFrame:
    """One row per kernel: identity, duration, and bound/roof fraction per level."""
    key = ["source", "kernel_id"]
    first = frame.drop_duplicates(key).set_index(key)
    columns = ["function", "nvtx_path", "duration_s", "limiting", "launches", "missing"]
    out = first[columns + (["kind"] if "kind" in first.columns else [])].copy()
    for level in frame["level"].astype(str).unique():
        sub = frame[frame["level"].astype(str) == level].set_index(key)
        out[f"bound_{level}"] = sub["bound"].astype(str)
        out[f"fraction_{level}"] = sub["roof_fraction"].astype("float64")
    return out.reset_index()


COPY_KINDS = ("memcpy", "memset")  # GPU activities that are not kernels: timed, never classified


def is_copy(frame: pd.DataFrame) -> np.ndarray:
    """Rows that time a memory copy or set (torch traces), not a kernel."""
    if "kind" not in frame.columns:
        return np.zeros(len(frame), dtype=bool)
    return frame["kind"].astype(str).isin(COPY_KINDS).to_numpy()


def bound_shares(frame: pd.DataFrame) -> pd.DataFrame:
    """Share of total kernel time that is memory-, compute-bound or unknown, per level (copies and sets,
    which are not kernels, left out)."""
    frame = frame[~is_copy(frame)]
    rows = []
    for level, sub in frame.groupby(frame["level"].astype(str), sort=False, observed=True):
        d = sub["duration_s"].astype("float64").fillna(0.0)
        total = d.sum()
        row: dict[str, Any] = {"level": level}
        for b in ("memory", "compute", "unknown"):
            row[b] = float(d[sub["bound"].astype(str) == b].sum() / total) if total > 0 else np.nan
        rows.append(row)
    return pd.DataFrame(rows, columns=["level", "memory", "compute", "unknown"])


def render(report: Any, *, top: int = 10, output: str | None = None) -> str:
    """Text summary of a Report (or a report DataFrame)."""
    frame: pd.DataFrame = getattr(report, "frame", report)
    warnings: list[str] = list(getattr(report, "warnings", []))
    hints: list[str] = list(getattr(report, "hints", []))
    lines: list[str] = []
    if frame.empty:
        return "no kernels"
    kernels = per_kernel(frame)
    total = kernels["duration_s"].astype("float64").sum(min_count=1)
    # each distinct text once (a report repeats a few over thousands of rows)
    devices = ", ".join(sorted({str(d) for d in frame["device"].astype(str).unique() if d})) or "unknown device"
    sources = ", ".join(sorted({str(s) for s in frame["source"].astype(str).unique() if s}))
    ceilings = "; ".join(
        f"{level}: " + ", ".join(_merge_clocks({_ceiling_family(str(c)) for c in sub["ceiling_source"].astype(str).unique()}))
        for level, sub in frame.groupby(frame["level"].astype(str), sort=False, observed=True)
    )
    launches = int(kernels["launches"].fillna(1).sum())
    copies = is_copy(kernels)
    what = f"{len(kernels)} kernels"
    if copies.any():
        what = f"{int((~copies).sum())} kernels + {int(copies.sum())} memory copies/sets"
    lines.append(f"{what} ({launches} launches, {human_time(total)}) from {sources} on {devices}")
    lines += _ceiling_lines(ceilings, getattr(report, "metadata", {}) or {})
    if output:
        lines.append(f"report: {output}")
    levels = [lv for lv in LEVELS if f"bound_{lv}" in kernels] + [
        c[6:] for c in kernels.columns if c.startswith("bound_") and c[6:] not in LEVELS
    ]

    lines.append("")
    lines.append(f"Top {min(top, len(kernels))} {'kernels and copies' if copies.any() else 'kernels'} by time (bound and "
                 "fraction of the attainable roof per level)")
    header = f"  {'function':<34} {'time':>9} {'share':>6}  " + "".join(f"{lv.upper():<15}" for lv in levels) + "limiting"
    lines.append(header)
    ranked = kernels.sort_values("duration_s", ascending=False, na_position="last").head(top)
    for _, k in ranked.iterrows():
        share = k["duration_s"] / total if total and np.isfinite(k["duration_s"]) else np.nan
        share_text = f"{share:.1%}" if np.isfinite(share) else "?"
        copy = str(k.get("kind", "")) in COPY_KINDS
        cells = "".join(f"{'(copy/set)' if copy else _cell(k[f'bound_{lv}'], k[f'fraction_{lv}']):<15}" for lv in levels)
        name = _short(k["function"] or k.get("kernel_name", ""), 34)
        lines.append(f"  {name:<34} {human_time(k['duration_s']):>9} {share_text:>6}  {cells}{k['limiting'] or '-'}")

    lines += op_lines(getattr(report, "ops", None), top)
    lines.append("")
    if copies.any():
        copy_s = float(kernels.loc[copies, "duration_s"].astype("float64").sum())
        lines.append(f"Memory copies/sets: {human_time(copy_s)} ({copy_s / total:.1%} of the time), not kernels: "
                     "timed, never classified")
    lines.append("Share of kernel time by bound")
    lines.append(f"  {'level':<6} {'memory':>8} {'compute':>8} {'unknown':>8}")
    for _, row in bound_shares(frame).iterrows():
        cells = " ".join(f"{row[b]:>8.1%}" if np.isfinite(row[b]) else f"{'?':>8}" for b in ("memory", "compute", "unknown"))
        lines.append(f"  {row['level']:<6} {cells}")

    metadata = getattr(report, "metadata", {}) or {}
    gains = _gain_lines(frame, top, ledger_used=bool(metadata.get("ledger")))
    if gains:
        lines.append("")
        lines.extend(gains)

    unknown = frame[(frame["bound"].astype(str) == "unknown").to_numpy() & ~is_copy(frame)]
    if len(unknown):
        lines.append("")
        n_kernels = unknown.drop_duplicates(["source", "kernel_id"]).shape[0]
        lines.append(f"Not classified: {n_kernels} kernel(s) at one or more levels; why:")
        reasons = unknown.groupby(unknown["missing"].astype(str), sort=False, observed=True).agg(
            rows=("kernel_id", "size"), levels=("level", lambda s: ",".join(sorted(set(map(str, s)))))
        ).sort_values("rows", ascending=False)
        for missing, r in reasons.head(5).iterrows():
            lines.append(f"  - {r['rows']} row(s) at {r['levels']}: missing {_first_names(missing) or 'FLOPs and bytes are both zero'}")

    traces = [str(i.get("name", "")) for i in metadata.get("inputs", []) if i.get("format") == "torch-trace"]
    coverage = analytic_coverage(frame, traces)
    if len(coverage):
        lines.append("")
        lines.append("Coverage of the torch trace(s): share of kernel time whose op has an analytic formula")
        for _, c in coverage.iterrows():
            if not c["time_s"] > 0:
                lines.append(f"  {_short(c['source'], 44):<44} no kernel durations ({c['kernels']} kernels)")
                continue
            lines.append(f"  {_short(c['source'], 44):<44} {c['share']:>6.1%} of {human_time(c['time_s'])} "
                         f"({c['costed']} of {c['kernels']} kernels)"
                         + (f"; largest uncovered: {_short(c['uncovered'], 70)} ({human_time(c['uncovered_s'])})"
                            if c["uncovered"] else ""))

    above = frame[frame["above_roof"].astype(bool)]
    if len(above):
        lines.append("")
        lines.append(f"Above the roof: {len(above)} row(s) achieve more than 105% of a roof — a counting or unit error "
                     "(check the ceilings' clock and the byte/FLOP metrics):")
        for _, r in above.head(5).iterrows():
            lines.append(f"  - {_short(r['function'], 40)} at {r['level']}: {r['achieved_bytes_per_s']:.3g} B/s vs "
                         f"{r['bandwidth_bytes_per_s']:.3g}, {r['achieved_flop_per_s']:.3g} FLOP/s vs {r['peak_flop_per_s']:.3g}")
    for w in warnings:
        lines.append(f"warning: {w}")
    for h in hints:
        lines.append(f"hint: {h}")
    return "\n".join(lines)


def op_lines(ops: pd.DataFrame | None, top: int) -> list[str]:
    """The op-level view's costed ops by time (a trace's REPORT.ops.parquet), the calls of one op and shape
    together: their kernels' summed time and their formula's whole FLOPs, so the rate is right even where a
    helper kernel carries none of them. Bound and roof fraction of the first call (one shape, one intensity)."""
    if ops is None or not len(ops) or not ops["flops"].notna().any():
        return []
    costed = ops[ops["flops"].notna()]
    groups = costed.groupby([costed["op"].astype(str), costed["flops_source"].astype(str)], sort=False, observed=True)
    table = groups.agg(time=("duration_s", "sum"), flops=("flops", "sum"), calls=("op", "size"),
                       kernels=("launches", "sum"), bound=("bound", "first"), fraction=("roof_fraction", "first"))
    table = table.sort_values("time", ascending=False).head(top)
    lines = ["", f"Top {len(table)} costed ops by time (op-level rows, calls of one op and shape together: their "
             "kernels' time, their formula's FLOPs)",
             f"  {'op':<34} {'time':>9} {'calls':>6} {'kernels':>7} {'FLOP/s':>9}  DRAM"]
    for (op, _), r in table.iterrows():
        rate = r["flops"] / r["time"] if r["time"] > 0 else np.nan
        lines.append(f"  {_short(str(op), 34):<34} {human_time(r['time']):>9} {int(r['calls']):>6} "
                     f"{int(r['kernels']):>7} {(f'{rate:.3g}' if np.isfinite(rate) else '?'):>9}  "
                     f"{_cell(r['bound'], r['fraction'])}")
    return lines


def _merge_clocks(families: set[str]) -> list[str]:
    """One entry per machine: launches profiled at slightly different clocks name the first set and a count."""
    by_machine: dict[str, list[str]] = {}
    for family in sorted(families):
        head, _, note = family.partition(" @ ")
        by_machine.setdefault(head, []).append(note)
    out: list[str] = []
    for head, clocks in by_machine.items():
        notes = [c for c in clocks if c]
        if len(notes) > 1:
            out.append(f"{head} @ the profiled clocks ({len(notes)} sets, e.g. {notes[0]})")
        else:
            out += [f"{head} @ {c}" if c else head for c in clocks]
    return out


def _ceiling_lines(per_level: str, metadata: dict[str, Any]) -> list[str]:
    """Where the roofs came from: an explicit --machine first (a what-if when it replaced the export's own
    ncu peaks), then per level; datasheet roofs without a recorded clock are at boost, and said so."""
    lines = []
    machine = metadata.get("machine")
    if machine:
        overrides = metadata.get("machine_overrides") or []
        what_if = " (overrides the export's ncu peaks: a what-if)" if overrides else ""
        lines.append(f"ceilings: --machine {machine.removeprefix('spec:')}{what_if}")
    lines.append(f"ceilings: {per_level}")
    if "spec:" in per_level and not all("@" in part for part in per_level.split("spec:")[1:]):
        lines.append("  (datasheet roofs without '@ … MHz' are at the boost clock: the export records no clock)")
    return lines


def _first_names(missing: str, keep: int = 4) -> str:
    names = [n.strip() for n in missing.split(", ") if n.strip()]
    if len(names) <= keep:
        return ", ".join(names)
    return ", ".join(names[:keep]) + f" and {len(names) - keep} more (the report's `missing` column lists all)"


def _ceiling_family(source: str) -> str:
    """'compute=ncu:…; memory=spec:A100#bandwidth…' -> 'compute ncu, memory spec:A100'."""
    if not source.startswith("compute="):
        return source.split(":")[0] if source.startswith("ncu") else source
    parts = []
    for part in source.split(";"):
        role, _, src = part.strip().partition("=")
        family = src.split("#")[0] if src.startswith(("spec:", "measured:", "file:")) else src.split(":")[0]
        parts.append(f"{role} {family}")
    return " + ".join(parts)


def _gain_lines(frame: pd.DataFrame, top: int, ledger_used: bool = False) -> list[str]:
    """The ledger join's part of the summary: always how many kernels matched when a mapping was given,
    then the kernels and NVTX ranges ranked by the time that could be gained."""
    has_ideal = "ideal_time_s" in frame and not frame["ideal_time_s"].isna().all()
    if not (ledger_used or has_ideal):
        return []
    from nsroof.report.ledger_join import coverage, gain_table

    matched, total = coverage(frame)
    table = gain_table(frame) if has_ideal else None
    if table is None or len(table) == 0:
        why = "" if matched else (" — check the mapping's patterns against the kernel names and NVTX paths, "
                                  "and the warnings below")
        return [f"Ledger: {matched} of {total} kernels matched and evaluated a formula; no ideal time could be computed"
                f"{' (no roofs: pass --machine)' if matched else ''}{why}"]
    lines = [f"Time that could be gained (duration - ideal time from the ledger; {matched} of {total} kernels matched)"]
    for _, r in table.head(top).iterrows():
        label = f"[{r['kind']}] {r['name']}"
        lines.append(f"  {_short(label, 60):<60} {human_time(float(r['gain_s'])):>9}  headroom {r['headroom']:.3g}x")
    return lines


def analytic_coverage(frame: pd.DataFrame, sources: list[str]) -> pd.DataFrame:
    """Per trace in `sources`: the share of its kernel time whose FLOPs come from an analytic formula
    (flops_source 'analytic:…'), the kernel counts, and the reason that leaves the most time uncosted."""
    columns = ["source", "share", "time_s", "costed", "kernels", "uncovered", "uncovered_s"]
    rows = []
    kernels = frame.drop_duplicates(["source", "kernel_id"])
    if "kind" in kernels.columns:  # copies and sets have no formula to cover them
        kernels = kernels[kernels["kind"].astype(str).isin(["kernel", "cpu_op"])]
    for source in sources:
        k = kernels[kernels["source"].astype(str) == source]
        if k.empty:
            continue
        d = k["duration_s"].astype("float64").fillna(0.0)
        costed = k["flops_source"].astype(str).str.startswith("analytic:").to_numpy()
        total = float(d.sum())
        by_reason = d[~costed].groupby(k.loc[~costed, "missing"].astype(str)).sum().sort_values(ascending=False)
        rows.append({"source": source, "share": float(d[costed].sum()) / total if total > 0 else np.nan,
                     "time_s": total, "costed": int(costed.sum()), "kernels": len(k),
                     "uncovered": str(by_reason.index[0]) if len(by_reason) else "",
                     "uncovered_s": float(by_reason.iloc[0]) if len(by_reason) else 0.0})
    return pd.DataFrame(rows, columns=columns)
