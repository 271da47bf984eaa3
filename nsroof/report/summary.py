"""The terminal summary of a report: where the time goes, what bounds it, and what could not be classified."""

from __future__ import annotations

import re
from typing import Any

import numpy as np
import pandas as pd

from nsroof.counters.quantities import READ_ONLY_LOWER_BOUND
from nsroof.frames.distinct import group_rows
from nsroof.report.op_tables import bound_cell as _cell
from nsroof.report.op_tables import fit_line, op_lines
from nsroof.schema import LEVELS, cpu_ops_only
from nsroof.units import human_time


def _short(text: str, width: int) -> str:
    from nsroof.names.kernel_names import fit_name

    return fit_name(str(text), width)


def per_kernel(frame: pd.DataFrame) -> pd.DataFrame:
    """One row per kernel: identity, duration, and bound/roof fraction per level."""
    key = ["source", "kernel_id"]
    first = frame.drop_duplicates(key).set_index(key)
    columns = ["function", "nvtx_path", "duration_s", "limiting", "launches", "missing"]
    out = first[columns + [c for c in ("kind", "start_us", "device_id", "module", "kernel_name")
                           if c in first.columns]].copy()
    for level in frame["level"].astype(str).unique():
        sub = frame[frame["level"].astype(str) == level].set_index(key)
        out[f"bound_{level}"] = sub["bound"].astype(str).reindex(out.index).fillna("")
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


def terminal_width() -> int:
    """The terminal's width (COLUMNS when set), never below 80: the width tables and hints are fitted to."""
    import shutil

    return max(80, shutil.get_terminal_size((80, 24)).columns)


def render(report: Any, *, top: int = 10, output: str | None = None, width: int | None = None,
           by: str = "kernel") -> str:
    """Text summary of a Report (or a report DataFrame), no line wider than `width` (default: the terminal's);
    by="name" puts the time per kernel name (name_table) where the longest kernels go."""
    width = width or terminal_width()
    frame: pd.DataFrame = getattr(report, "frame", report)
    metadata = getattr(report, "metadata", {}) or {}
    if frame.empty:
        return "no kernels"
    kernels = per_kernel(frame)
    lines = _head_lines(frame, kernels, metadata, output)
    from nsroof.report.breakdown import category_lines, phase_lines, step_lines

    for part in (category_lines(frame, width), step_lines(metadata, width), phase_lines(frame)):
        lines += ["", *part] if part else []
    lines += ["", *(name_table(frame, top, width) if by == "name" else _top_table(kernels, top, width))]
    lines += op_lines(getattr(report, "ops", None), top, width, cpu=cpu_ops_only(frame))
    lines += ["", *_share_lines(frame, kernels)]
    gains = _gain_lines(frame, top, ledger_used=bool(metadata.get("ledger")), width=width)
    lines += ["", *gains] if gains else []
    for part in (_unknown_lines(frame), _coverage_lines(frame, metadata), _above_lines(frame)):
        lines += ["", *part] if part else []
    lines += [f"warning: {w}" for w in [*lower_bound_warnings(frame), *getattr(report, "warnings", [])]]
    lines += [f"hint: {h}" for h in getattr(report, "hints", [])]
    return "\n".join(fit_line(line, width) for line in lines)


def _head_lines(frame: pd.DataFrame, kernels: pd.DataFrame, metadata: dict[str, Any],
                output: str | None) -> list[str]:
    total = kernels["duration_s"].astype("float64").sum(min_count=1)
    # each distinct text once (a report repeats a few over thousands of rows)
    devices = (", ".join(sorted({str(d) for d in frame["device"].astype(str).unique() if d}))
               or "unknown device")
    sources = ", ".join(sorted({str(s) for s in frame["source"].astype(str).unique() if s}))
    ceilings = "; ".join(
        f"{level}: " + ", ".join(_merge_clocks({_ceiling_family(str(c))
                                                for c in sub["ceiling_source"].astype(str).unique()}))
        for level, sub in frame.groupby(frame["level"].astype(str), sort=False, observed=True)
    )
    launches = int(kernels["launches"].fillna(1).sum())
    copies = is_copy(kernels)
    what = f"{len(kernels)} {'ops' if cpu_ops_only(kernels) else 'kernels'}"
    if copies.any():
        what = f"{int((~copies).sum())} kernels + {int(copies.sum())} memory copies/sets"
    busy = gpu_busy_s(kernels)
    wall = (f" summed; the GPU busy {human_time(busy)}, kernels overlapping on streams counted once"
            if _overlapped(busy, total) else "")
    calls = "calls" if cpu_ops_only(kernels) else "launches"
    lines = [f"{what} ({launches} {calls}, {human_time(total)}{wall}) from {sources} on {devices}"]
    if metadata.get("selection"):
        lines.append(f"selected: {metadata['selection']}")
    lines += _ceiling_lines(ceilings, metadata)
    if output:
        lines.append(f"report: {output}")
    return lines


def _top_table(kernels: pd.DataFrame, top: int, width: int) -> list[str]:
    """The longest kernels (ops of a CPU trace), one line each, sized to `width`: id, a name cut in the middle
    (the suffix that tells `…_nn` from `…_tn` kept; distinct names stay distinct), the module when the rows
    carry one (its tail: the layer), time, share, bound and roof fraction per level, the limiting level."""
    from nsroof.names.kernel_names import fit_names

    if top <= 0:
        return []
    levels = [lv for lv in LEVELS if f"bound_{lv}" in kernels] + [
        c[6:] for c in kernels.columns if c.startswith("bound_") and c[6:] not in LEVELS]
    total = kernels["duration_s"].astype("float64").sum(min_count=1)
    copies = is_copy(kernels)
    ids = kernels["kernel_id"].astype(str)
    id_w = max(2, int(ids.str.len().max()))
    compact = width - (2 + id_w + 1 + 1 + 9 + 1 + 6 + 2 + 8) - 13 * len(levels) < 24
    cell_w, limit_w, time_w = (10, 5, 8) if compact else (13, 8, 9)
    room = max(12, width - (2 + id_w + 1 + 1 + time_w + 1 + 6 + 2 + limit_w) - cell_w * len(levels))
    ranked = kernels.sort_values("duration_s", ascending=False, na_position="last").head(top)
    functions = [str(f or n) for f, n in zip(_texts(ranked, "function"), _texts(ranked, "kernel_name"),
                                             strict=True)]
    modules = _texts(ranked, "module") if "module" in ranked else []
    longest = max([len(f) for f in functions] + [len("function")])
    mod_w = 0
    if any(modules) and room >= 40:  # a module column takes what the names leave, 12 characters or more
        name_w = min(longest, max(16, room * 11 // 20))
        mod_w = min(max(len(m) for m in modules), room - name_w - 1)
        mod_w = mod_w if mod_w >= 12 else 0
        room -= mod_w + 1 if mod_w else 0
    name_w = min(room, longest)  # a wide terminal gives the names room, no more
    names = fit_names(functions, name_w)
    mods = fit_names(modules, mod_w, keep="tail") if mod_w else []
    word = "ops" if cpu_ops_only(kernels) else "kernels"
    lines = [f"Top {min(top, len(kernels))} {f'{word} and copies' if copies.any() else word} by time "
             "(bound and fraction of the attainable roof per level)",
             f"  {'id':>{id_w}} {'function' if word == 'kernels' else 'op':<{name_w}} "
             + (f"{'module':<{mod_w}} " if mod_w else "") + f"{'time':>{time_w}} {'share':>6}  "
             + "".join(f"{lv.upper():<{cell_w}}" for lv in levels) + ("limit" if compact else "limiting")]
    for i, (_, k) in enumerate(ranked.iterrows()):
        share = k["duration_s"] / total if total and np.isfinite(k["duration_s"]) else np.nan
        share_text = f"{share:.1%}" if np.isfinite(share) else "?"
        copy = str(k.get("kind", "")) in COPY_KINDS
        cells = "".join(
            f"{'(copy/set)' if copy else _cell(k[f'bound_{lv}'], k[f'fraction_{lv}'], compact):<{cell_w}}"
            for lv in levels)
        module = f"{mods[i] or '-':<{mod_w}} " if mod_w else ""
        lines.append(f"  {k['kernel_id']!s:>{id_w}} {names[i]:<{name_w}} {module}"
                     f"{human_time(k['duration_s']):>{time_w}} "
                     f"{share_text:>6}  {cells}{_limit(k['limiting'], compact) or '-'}")
    return lines


def _texts(frame: pd.DataFrame, column: str) -> list[str]:
    """A text column's values as strings, '' for a missing value or column."""
    if column not in frame:
        return [""] * len(frame)
    return ["" if v is None or (isinstance(v, float) and np.isnan(v)) or v is pd.NA else str(v)
            for v in frame[column].astype(object).tolist()]


def _limit(limiting: str, compact: bool) -> str:
    return "comp" if compact and limiting == "compute" else str(limiting or "")


def _share_lines(frame: pd.DataFrame, kernels: pd.DataFrame) -> list[str]:
    lines = []
    copies = is_copy(kernels)
    if copies.any():
        total = kernels["duration_s"].astype("float64").sum(min_count=1)
        copy_s = float(kernels.loc[copies, "duration_s"].astype("float64").sum())
        lines.append(f"Memory copies/sets: {human_time(copy_s)} ({copy_s / total:.1%} of the time), not "
                     "kernels: timed, never classified")
    lines.append(f"Share of {'op' if cpu_ops_only(kernels) else 'kernel'} time by bound")
    lines.append(f"  {'level':<6} {'memory':>8} {'compute':>8} {'unknown':>8}")
    for _, row in bound_shares(frame).iterrows():
        cells = " ".join(f"{row[b]:>8.1%}" if np.isfinite(row[b]) else f"{'?':>8}"
                         for b in ("memory", "compute", "unknown"))
        lines.append(f"  {row['level']:<6} {cells}")
    return lines


def _unknown_lines(frame: pd.DataFrame) -> list[str]:
    unknown = frame[(frame["bound"].astype(str) == "unknown").to_numpy() & ~is_copy(frame)]
    if not len(unknown):
        return []
    n_kernels = unknown.drop_duplicates(["source", "kernel_id"]).shape[0]
    word = "op" if cpu_ops_only(frame) else "kernel"
    lines = [f"Not classified: {n_kernels} {word}(s) at one or more levels; "
             "why:"]
    reasons = unknown.groupby(unknown["missing"].astype(str), sort=False, observed=True).agg(
        rows=("kernel_id", "size"), levels=("level", lambda s: ",".join(sorted(set(map(str, s)))))
    ).sort_values("rows", ascending=False)
    for missing, r in reasons.head(5).iterrows():
        lines.append(f"  - {r['rows']} row(s) at {r['levels']}: missing "
                     f"{_first_names(missing) or 'FLOPs and bytes are both zero'}")
    return lines


def _coverage_lines(frame: pd.DataFrame, metadata: dict[str, Any]) -> list[str]:
    traces = [str(i.get("name", "")) for i in metadata.get("inputs", []) if i.get("format") == "torch-trace"]
    coverage = analytic_coverage(frame, traces)
    if not len(coverage):
        return []
    word = "op" if cpu_ops_only(frame) else "kernel"
    streams = "" if word == "op" else " (summed over streams)"
    lines = [f"Coverage of the torch trace(s): share of {word} time{streams} whose op has an analytic "
             "formula"]
    replays = {str(i.get("name", "")): (i.get("facts") or {}).get("graphs")
               for i in metadata.get("inputs", []) if isinstance(i, dict)}
    for _, c in coverage.iterrows():
        graphs = replays.get(c["source"])
        if not c["time_s"] > 0:
            lines.append(f"  {_short(c['source'], 44):<44} no {word} durations ({c['kernels']} {word}s)")
            continue
        busy = (f"; GPU busy {human_time(c['busy_s'])} (overlaps once), "
                f"{c['costed_busy_s'] / c['busy_s']:.1%} of it under costed kernels"
                if _overlapped(c["busy_s"], c["time_s"]) and word == "kernel" else "")
        lines.append(f"  {_short(c['source'], 44):<44} {c['share']:>6.1%} of {human_time(c['time_s'])} "
                     f"{word} time ({c['costed']} of {c['kernels']} {word}s){busy}"
                     + (f"; largest uncovered: {_short(c['uncovered'], 70)} ({human_time(c['uncovered_s'])})"
                        if c["uncovered"] else ""))
        lines += [f"    {graph_replay_line(graphs)}"] if isinstance(graphs, dict) else []
    return lines



def graph_replay_line(graphs: dict[str, Any]) -> str:
    """What became of a trace's CUDA/HIP graph replays (the importer's facts, nsroof.importers.trace.graphs):
    how many launches, how many of their kernels a capture trace mapped, how many launches matched several
    captured graphs equally and how many of those were ambiguous (other ops or shapes behind the same
    kernels); or the capture trace to pass."""
    launches, mapped = int(graphs.get("graph_launches", 0)), int(graphs.get("mapped", 0))
    kernels = mapped + int(graphs.get("unmapped", 0))
    names = [str(n) for n in graphs.get("captures") or []]
    if not names:
        return (f"graph replays: {launches} launch(es), {kernels} kernels with the launch as their op: no "
                "capture trace; pass --capture CAPTURE_TRACE (the trace recorded around the graphs' capture)")
    tied, ambiguous = int(graphs.get("tied_launches", 0)), int(graphs.get("ambiguous_launches", 0))
    captured = ", ".join(_short(n, 44) for n in names)
    return (f"graph replays: {launches} launch(es), each with the full cost of the ops it replays; {mapped} "
            f"of {kernels} kernels mapped to {graphs.get('captured_graphs', 0)} graph(s) captured in "
            f"{captured}; {tied} launch(es) matched several captured graphs equally, {ambiguous} of them "
            "ambiguous (other ops or shapes: the latest captured taken)")


def _above_lines(frame: pd.DataFrame) -> list[str]:
    """The above-roof note: how many rows, then the first five with their likely
    cause (`above_roof_cause`)."""
    above = frame[frame["above_roof"].astype(bool)]
    if not len(above):
        return []
    lines = [f"Above the roof: {len(above)} row(s) achieve more than 105% of a roof; the likely cause per "
             "row (`above_roof_cause`):"]
    for _, r in above.head(5).iterrows():
        cause = str(r.get("above_roof_cause", "") or "a counting or unit error")
        lines.append(f"  - {_short(r['function'], 40)} at {r['level']}: {r['achieved_bytes_per_s']:.3g} B/s "
                     f"vs {r['bandwidth_bytes_per_s']:.3g}, {r['achieved_flop_per_s']:.3g} FLOP/s vs "
                     f"{r['peak_flop_per_s']:.3g} — {cause}")
    return lines


def above_causes(above: pd.DataFrame, total: float, top: int = 3) -> list[str]:
    """One line per op among the `top` with the most above-roof time (`above`: the above-roof rows of a
    report of `total` seconds; an op-less row goes by its kernel name): its rows, time share and the cause
    of its longest above-roof row (roofs.roofline.above_roof_cause). nsroof profile's summary."""
    d = above["duration_s"].astype("float64").fillna(0.0).to_numpy()
    names = above["op"].astype(str).to_numpy(dtype=object)
    ops = np.where(names != "", names, above["kernel_name"].astype(str).to_numpy(dtype=object))
    causes = (above["above_roof_cause"].astype(str).to_numpy(dtype=object) if "above_roof_cause" in above
              else np.full(len(above), "", dtype=object))
    per_op = pd.Series(d).groupby(ops, sort=False).sum().sort_values(ascending=False).head(top)
    lines = []
    for op, t in per_op.items():
        mine = np.flatnonzero(ops == op)
        cause = causes[mine[np.argmax(d[mine])]] or "a counting or unit error"
        share = f"{t / total:.1%}" if total > 0 else "-"
        lines.append(f"  - {op} ({len(mine)} rows, {share} of the time): {cause}")
    return lines


def lower_bound_warnings(frame: pd.DataFrame) -> list[str]:
    """One warning counting the rows whose L2/L1 bytes come from a read-only counter that saw fewer bytes than
    DRAM (a write-heavy kernel's stores pass uncounted) in an export with no write-inclusive counter of that
    level, naming the counter per level: the value is known (so `missing` stays empty), but only as a lower
    bound, and their intensity an upper bound."""
    if "bytes_source" not in frame.columns or not len(frame):
        return []
    counts = frame.groupby([frame["level"].astype(str), frame["bytes_source"].astype(str)], sort=False,
                           observed=True).size()
    note = re.compile(r"^(?P<counter>.*) \(" + re.escape(READ_ONLY_LOWER_BOUND)
                      + r"; collect (?P<wanted>.*)\)$")
    groups: dict[tuple[str, str, str], int] = {}
    for (level, source), n in counts.items():
        m = note.match(source)
        if m is not None:
            key = (level, m.group("counter"), m.group("wanted"))
            groups[key] = groups.get(key, 0) + int(n)
    if not groups:
        return []
    parts = "; ".join(f"{level.upper()} {counter}: {n} row(s), collect {wanted}"
                      for (level, counter, wanted), n in groups.items())
    return [f"{sum(groups.values())} row(s) count bytes with a read-only counter that saw fewer bytes than "
            "DRAM (stores uncounted): their bytes are a lower bound, so a compute-bound verdict there may be "
            f"wrong ({parts})"]


def _merge_clocks(families: set[str]) -> list[str]:
    """One entry per machine: launches profiled at slightly different clocks name the first set
    and a count."""
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
        lines.append("  (datasheet roofs without '@ … MHz' are at the boost clock: "
                     "the export records no clock)")
    return lines


def _first_names(missing: str, keep: int = 4) -> str:
    names = [n.strip() for n in missing.split(", ") if n.strip()]
    if len(names) <= keep:
        return ", ".join(names)
    return (", ".join(names[:keep])
            + f" and {len(names) - keep} more (the report's `missing` column lists all)")


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


def _gain_lines(frame: pd.DataFrame, top: int, ledger_used: bool = False, width: int = 80) -> list[str]:
    """The ledger join's part of the summary: always how many kernels matched when a mapping was given,
    then the kernels and NVTX ranges ranked by the time that could be gained."""
    has_ideal = "ideal_time_s" in frame and not frame["ideal_time_s"].isna().all()
    if not (ledger_used or has_ideal):
        return []
    from nsroof.roofs.ledger_join import coverage, gain_table

    matched, total = coverage(frame)
    table = gain_table(frame) if has_ideal else None
    if table is None or len(table) == 0:
        why = "" if matched else (" — check the mapping's patterns against the kernel names and NVTX paths, "
                                  "and the warnings below")
        return [f"Ledger: {matched} of {total} kernels matched and evaluated a formula; no ideal time could "
                f"be computed{' (no roofs: pass --machine)' if matched else ''}{why}"]
    from nsroof.names.kernel_names import fit_names

    word = "ops" if cpu_ops_only(frame) else "kernels"
    lines = [f"Time that could be gained (duration - ideal time from the ledger; {matched} of {total} "
             f"{word} matched)"]
    label_w = max(20, min(60, width - 2 - 1 - 9 - 2 - 18))
    shown = table.head(top)
    labels = fit_names([f"[{r['kind']}] {r['name']}" for _, r in shown.iterrows()], label_w)
    for label, (_, r) in zip(labels, shown.iterrows(), strict=True):
        lines.append(f"  {label:<{label_w}} {human_time(float(r['gain_s'])):>9}  "
                     f"headroom {r['headroom']:.3g}x")
    return lines


def _overlapped(busy_s: float, summed_s: float) -> bool:
    """Whether kernels overlapped enough (0.5% of the summed time) for the busy time to be
    worth its own figure."""
    return bool(np.isfinite(busy_s) and busy_s > 0 and busy_s < 0.995 * summed_s)


def gpu_busy_s(kernels: pd.DataFrame) -> float:
    """How long the GPUs were busy with these kernels (one row each): per (source, device_id) the union of
    their [start_us, start_us + duration_s) intervals (nsroof.counters.timeline.busy_s), summed over devices;
    NaN when a start is not recorded (an ncu export, --aggregate). Unlike the summed durations, kernels
    overlapping on streams (NCCL beside compute) count once."""
    from nsroof.counters.timeline import busy_s

    if "start_us" not in kernels:
        return np.nan
    if not len(kernels):
        return 0.0
    device = kernels["device_id"].astype(object).where(kernels["device_id"].notna(), "") \
        if "device_id" in kernels else pd.Series([""] * len(kernels), index=kernels.index)
    group, _ = pd.factorize(kernels["source"].astype(str) + "\x00" + device.astype(str), sort=False)
    return float(np.sum(busy_s(kernels["start_us"].astype("float64").to_numpy(),
                               kernels["duration_s"].astype("float64").to_numpy(), group)))


def analytic_coverage(frame: pd.DataFrame, sources: list[str]) -> pd.DataFrame:
    """Per trace in `sources`: the share of its kernel time whose FLOPs come from an analytic formula
    (flops_source 'analytic:…'), the kernel counts, and the reason that leaves the most time uncosted; beside
    the summed kernel time (time_s), the GPU's busy time (busy_s: overlapping kernels once, gpu_busy_s) and
    the part of it under costed kernels (costed_busy_s)."""
    columns = ["source", "share", "time_s", "costed", "kernels", "uncovered", "uncovered_s", "busy_s",
               "costed_busy_s"]
    rows = []
    kernels = frame.drop_duplicates(["source", "kernel_id"])
    if "kind" in kernels.columns:  # copies and sets have no formula to cover them
        kernels = kernels[kernels["kind"].astype(str).isin(["kernel", "cpu_op"])]
    source_code, names = pd.factorize(kernels["source"].astype(str).to_numpy(dtype=object))
    # one pass for all sources
    rows_of = dict(zip(names.tolist(), group_rows(source_code, len(names)), strict=True))
    for source in sources:
        if source not in rows_of:
            continue
        k = kernels.iloc[rows_of[source]]
        d = k["duration_s"].astype("float64").fillna(0.0)
        costed = k["flops_source"].astype(str).str.startswith("analytic:").to_numpy()
        total = float(d.sum())
        by_reason = (d[~costed].groupby(k.loc[~costed, "missing"].astype(str)).sum()
                     .sort_values(ascending=False))
        rows.append({"source": source, "share": float(d[costed].sum()) / total if total > 0 else np.nan,
                     "time_s": total, "costed": int(costed.sum()), "kernels": len(k),
                     "uncovered": str(by_reason.index[0]) if len(by_reason) else "",
                     "uncovered_s": float(by_reason.iloc[0]) if len(by_reason) else 0.0,
                     "busy_s": gpu_busy_s(k), "costed_busy_s": gpu_busy_s(k[costed])})
    return pd.DataFrame(rows, columns=columns)


#: the columns of the by-name breakdown (`nsroof analyze --by name`, and its --json/--csv), in order
BY_NAME_COLUMNS: tuple[str, ...] = ("function", "kernels", "launches", "duration_s", "time_share", "bound",
                                    "bound_time_share", "limiting", "time_floor_s", "roof_fraction")


def by_name(frame: pd.DataFrame) -> pd.DataFrame:
    """Time per kernel name across launches (HTA's kernel breakdown), longest first: kernels and launches
    of the name, total duration_s and its time_share of all kernel time, the bound and the limiting level
    that hold most of the name's time (bound_time_share: the share of its time they hold), and the roof
    fraction of the name as a whole = Σ time_floor_s / Σ duration_s over its kernels with a floor (the
    time-weighted mean of their roof fractions, each being time_floor_s / duration_s)."""
    from nsroof.report.wide import kernel_rows

    k = kernel_rows(frame)
    if k.empty:
        return pd.DataFrame(columns=list(BY_NAME_COLUMNS))
    named = k["function"].notna() & (k["function"].astype(str) != "")
    k = k.assign(function=k["function"].astype(object).where(named, k["kernel_name"]).astype(str),
                 duration_s=k["duration_s"].astype("float64").fillna(0.0),
                 launches=k["launches"].astype("float64").fillna(1.0))
    floored = k["time_floor_s"].astype("float64").notna() & (k["time_floor_s"].astype("float64") > 0)
    total = float(k["duration_s"].sum())
    rows = []
    for name, sub in k.groupby("function", sort=False):
        time = float(sub["duration_s"].sum())
        bound_time = sub.groupby(sub["bound"].astype(str))["duration_s"].sum().sort_values(ascending=False)
        limit_time = (sub.groupby(sub["limiting"].fillna("").astype(str))["duration_s"].sum()
                      .sort_values(ascending=False))
        has_floor = sub[floored.loc[sub.index]]
        floor_time = float(has_floor["duration_s"].sum())
        rows.append({
            "function": name, "kernels": len(sub), "launches": int(sub["launches"].sum()), "duration_s": time,
            "time_share": time / total if total > 0 else np.nan, "bound": bound_time.index[0],
            "bound_time_share": float(bound_time.iloc[0] / time) if time > 0 else np.nan,
            "limiting": limit_time.index[0],
            "time_floor_s": float(has_floor["time_floor_s"].sum()) if len(has_floor) else np.nan,
            "roof_fraction": (float(has_floor["time_floor_s"].sum() / floor_time) if floor_time > 0
                              else np.nan),
        })
    out = pd.DataFrame(rows, columns=list(BY_NAME_COLUMNS))
    return out.sort_values("duration_s", ascending=False, kind="stable").reset_index(drop=True)


def name_table(frame: pd.DataFrame, top: int, width: int) -> list[str]:
    """The by-name breakdown as a table sized to `width`: name (cut in the middle), kernels, launches, total
    time, share, the bound holding most of the name's time (its share when the kernels differ), the
    limiting level, and the name's fraction of its roofs."""
    if top <= 0:
        return []
    names = by_name(frame)
    ranked = names.head(top)
    compact = width < 100
    bound_w, limit_w = (9, 6) if compact else (13, 9)
    fixed = 2 + 1 + 5 + 1 + 8 + 1 + 9 + 1 + 6 + 2 + bound_w + limit_w + 5
    longest = int(ranked["function"].astype(str).str.len().max()) if len(ranked) else 0
    name_w = min(max(12, width - fixed), max(longest, len("kernel name")))
    lines = [f"Top {len(ranked)} of {len(names)} kernel names by total time",
             "  (bound, limit: those of most of each name's time; roof = Σ floor / Σ time)",
             f"  {'kernel name':<{name_w}} {'kerns':>5} {'launches':>8} {'time':>9} {'share':>6}  "
             f"{'bound':<{bound_w}}{'limit' if compact else 'limiting':<{limit_w}}{'roof':>5}"]
    from nsroof.names.kernel_names import fit_names

    names = fit_names(ranked["function"].astype(str).tolist(), name_w)
    for i, (_, n) in enumerate(ranked.iterrows()):
        share = f"{n['time_share']:.1%}" if np.isfinite(n["time_share"]) else "?"
        bound = _cell(str(n["bound"]), n["bound_time_share"] if n["bound_time_share"] < 0.995 else np.nan,
                      compact)
        roof = f"{n['roof_fraction']:.0%}" if np.isfinite(n["roof_fraction"]) else "?"
        lines.append(f"  {names[i]:<{name_w}} {n['kernels']:>5} {n['launches']:>8} "
                     f"{human_time(n['duration_s']):>9} {share:>6}  {bound:<{bound_w}}"
                     f"{_limit(str(n['limiting']), compact) or '-':<{limit_w}}{roof:>5}")
    return lines
