"""Before/after comparison of two reports: per kernel (or op) matched by function name + NVTX path,
and per NVTX range, the change in time, in bytes per level, in bound — like with like.

Works on reports (frames with nsroof.schema.COLUMNS and their metadata) only: `nsroof compare` reads
report files and dataset folders, or runs the pipeline on raw exports, and hands the reports here.

The NVTX path is keyed without torch emit_nvtx's `seq = …`, `op_id = …` and `input_op_ids = …`
counters (nsroof.names.nvtx_paths.stable_nvtx_path): they shift whenever one op is added upstream, so
with them nothing would match after a code change. `sizes = …` stays: a new shape is a different call.
A step range's number (`ProfilerStep#3`, `step 3`) is keyed as `#*`: step 3 of one run is step 1 of
the other.

Kernels with the same key are merged on each side first (launch counts add up). A kernel's bound at a
level, after merging, is the bound that holds for most of its time there (time-weighted majority; a
tie goes to the bound met first in report order).

Levels: dram, l2, l1, and `link` (nsroof.schema.LINK_LEVEL): a collective's row, its bus bytes judged against
the interconnect, standing where its DRAM row would — so its bytes and bound are compared at the link (the
`*_link_*` columns, the LINK bytes total), the per-kernel lines show them in the DRAM column marked `link`,
and a range's memory-bound share counts a link-bound collective as it counts a DRAM-bound kernel.

Normalisation (`per`), said in the output:
  run     totals as measured (the two runs did the same work: same launches, same steps)
  step    every total divided by its run's step count (both counts known: metadata or step ranges)
  launch  the before side's time, FLOPs and bytes of each matched kernel scaled to the after side's
          launch count (before per launch × after launches): per kernel the ratio is per launch, and
          the totals compare the same launches
`auto` picks step when both step counts are known, else launch when any matched kernel's launch
count differs, else run.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from nsroof.errors import NsroofError
from nsroof.names.nvtx_paths import STEP_RANGE
from nsroof.report.wide import ROW_LEVELS
from nsroof.schema import LINK_LEVEL
from nsroof.units import human_bytes, human_time

KEY: tuple[str, str] = ("function", "nvtx_path")
NO_RANGE = "(no NVTX range)"
PER = ("auto", "run", "step", "launch")
REQUIRED = ("function", "nvtx_path", "level", "duration_s", "bytes", "bound")
# relative difference of the ncu-measured roofs above which two runs did not run at the same clocks
CLOCK_TOLERANCE = 0.02


def missing_columns(report: pd.DataFrame) -> list[str]:
    return [c for c in REQUIRED if c not in report.columns]


def kernel_table(report: pd.DataFrame) -> pd.DataFrame:
    """One row per (function, nvtx_path): launches, time, FLOPs, bytes and bound per level."""
    df = report.copy()
    for col in ("function", "nvtx_path", "level", "bound", "source"):
        if col in df.columns:
            df[col] = df[col].astype(object).where(df[col].notna(), "").astype(str)
    df["nvtx_path"] = _stable_paths(df["nvtx_path"])
    df["duration_s"] = pd.to_numeric(df["duration_s"], errors="coerce")
    df["bytes"] = pd.to_numeric(df["bytes"], errors="coerce")
    if "launches" not in df.columns:
        df["launches"] = 1
    df["launches"] = pd.to_numeric(df["launches"], errors="coerce").fillna(1).astype("int64")
    ident = [c for c in ("source", "rank", "host", "kernel_id") if c in df.columns]
    # one row per kernel launch (group) for time and FLOPs: the level rows repeat them
    launches = df.drop_duplicates(subset=ident) if ident else df[df["level"] == df["level"].iloc[0]]
    base = launches.groupby(list(KEY), sort=False, dropna=False).agg(
        launches=("launches", "sum"),
        duration_s=("duration_s", lambda s: s.sum(min_count=1)),
        flops=("flops", lambda s: pd.to_numeric(s, errors="coerce").sum(min_count=1)),
    )
    for level in ROW_LEVELS:
        at = df[df["level"] == level]
        if at.empty:
            base[f"bytes_{level}"] = np.nan
            base[f"bound_{level}"] = ""
            continue
        base[f"bytes_{level}"] = at.groupby(list(KEY), sort=False)["bytes"].sum(min_count=1)
        base[f"bound_{level}"] = _majority_bound(at)
    base[[f"bound_{lv}" for lv in ROW_LEVELS]] = base[[f"bound_{lv}" for lv in ROW_LEVELS]].fillna("")
    return base


def _stable_paths(paths: pd.Series) -> pd.Series:
    """Each distinct path rewritten once (a report repeats each path on every launch and level)."""
    from nsroof.names.nvtx_paths import stable_nvtx_path

    mapping = {p: _mask_steps(stable_nvtx_path(p)) for p in paths.unique()}
    return paths.map(mapping).astype(object)


def _mask_steps(path: str) -> str:
    return ("/".join(STEP_RANGE.sub(lambda m: m.group("stem") + "*", part) for part in path.split("/"))
            if path else path)


def steps_in(report: pd.DataFrame, metadata: dict[str, Any] | None = None) -> int | None:
    """The number of steps a report covers: recorded by `nsroof profile`/`demo` in its metadata, or
    the distinct step ranges (ProfilerStep#N, step N) in its NVTX paths; None when neither says."""
    meta = metadata or {}
    steps = meta.get("steps")
    if isinstance(steps, int) and steps > 0:
        return steps
    marked, warmup = meta.get("steps_marked"), meta.get("warmup") or 0
    if isinstance(marked, int) and isinstance(warmup, int) and marked - warmup > 0:
        return marked - warmup
    if "nvtx_path" not in report.columns or report.empty:
        return None
    found = {m.group(0) for p in report["nvtx_path"].dropna().astype(str).unique() for part in p.split("/")
             if (m := STEP_RANGE.match(part))}
    return len(found) or None


def _majority_bound(at: pd.DataFrame) -> pd.Series:
    weights = at.assign(w=at["duration_s"].fillna(0.0), bound=at["bound"].replace("", "unknown"))
    per = weights.groupby([*KEY, "bound"], sort=False)["w"].sum().reset_index()
    per = per.sort_values([*KEY, "w"], ascending=[True, True, False], kind="stable")
    return per.drop_duplicates(subset=list(KEY)).set_index(list(KEY))["bound"]


def _changes(joined: pd.DataFrame, numeric: tuple[str, ...]) -> None:
    """On a before/after outer join: the numeric columns (and bytes per level) as numbers, then the time
    change `delta_s` (a side that is absent counts 0 s), `speedup` = before / after,
    and `delta_bytes_<level>`."""
    for col in (*numeric, *(f"bytes_{lv}" for lv in ROW_LEVELS)):
        joined[f"{col}_before"] = pd.to_numeric(joined[f"{col}_before"], errors="coerce")
        joined[f"{col}_after"] = pd.to_numeric(joined[f"{col}_after"], errors="coerce")
    joined["delta_s"] = joined["duration_s_after"].fillna(0.0) - joined["duration_s_before"].fillna(0.0)
    joined["speedup"] = joined["duration_s_before"] / joined["duration_s_after"]
    for lv in ROW_LEVELS:
        joined[f"delta_bytes_{lv}"] = joined[f"bytes_{lv}_after"] - joined[f"bytes_{lv}_before"]


def normalise(a: pd.DataFrame, b: pd.DataFrame, per: str,
              steps: tuple[int | None, int | None]) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Two kernel tables made comparable (`per`: run, step or launch; see the module docstring)."""
    amounts = ["duration_s", "flops", *(f"bytes_{lv}" for lv in ROW_LEVELS)]
    a, b = a.copy(), b.copy()
    if per == "step":
        for table, n in ((a, steps[0]), (b, steps[1])):
            if not n:
                raise NsroofError("per-step comparison needs both runs' step counts (nsroof profile records "
                                  "them; torch traces hold ProfilerStep#N ranges) — use --per launch or "
                                  "--per run")
            table["launches"] = table["launches"] / n
            table[amounts] = table[amounts] / n
    elif per == "launch":
        both = a.index.intersection(b.index)
        scale = b.loc[both, "launches"].astype(float) / a.loc[both, "launches"].astype(float)
        a.loc[both, amounts] = a.loc[both, amounts].mul(scale, axis=0)
    elif per != "run":
        raise NsroofError(f"unknown normalisation {per!r} — use one of {', '.join(PER)}")
    return a, b


def choose_per(requested: str, a: pd.DataFrame, b: pd.DataFrame, steps: tuple[int | None, int | None]) -> str:
    if requested != "auto":
        return requested
    if steps[0] and steps[1]:
        return "step"
    return "launch" if _launches_differ(a, b) else "run"


def _launches_differ(a: pd.DataFrame, b: pd.DataFrame) -> int:
    both = a.index.intersection(b.index)
    return int((a.loc[both, "launches"] != b.loc[both, "launches"]).sum())


def join_kernels(a: pd.DataFrame, b: pd.DataFrame) -> pd.DataFrame:
    """Per kernel: before/after launches, time, bytes and bound at each level, the changes, and
    `status` both | removed (only before) | added (only after); sorted by |time change|."""
    joined = a.join(b, how="outer", suffixes=("_before", "_after"))
    in_a = joined.index.isin(a.index)
    in_b = joined.index.isin(b.index)
    joined["status"] = np.select([in_a & in_b, in_a], ["both", "removed"], "added")
    _changes(joined, ("launches", "duration_s", "flops"))
    for lv in ROW_LEVELS:
        for side in ("before", "after"):
            joined[f"bound_{lv}_{side}"] = joined[f"bound_{lv}_{side}"].astype(object).where(
                joined[f"bound_{lv}_{side}"].notna(), "")
        # a real shift between memory and compute; gaining or losing a roof ('unknown') is not one
        known = (joined[f"bound_{lv}_before"].isin(["memory", "compute"])
                 & joined[f"bound_{lv}_after"].isin(["memory", "compute"]))
        joined[f"bound_{lv}_changed"] = known & (joined[f"bound_{lv}_before"] != joined[f"bound_{lv}_after"])
    out = joined.reset_index()
    order = out["delta_s"].abs().sort_values(ascending=False, kind="stable").index
    cols = ["function", "nvtx_path", "status", "launches_before", "launches_after", "duration_s_before",
            "duration_s_after", "delta_s", "speedup", "flops_before", "flops_after"]
    for lv in ROW_LEVELS:
        cols += [f"bytes_{lv}_before", f"bytes_{lv}_after", f"delta_bytes_{lv}"]
    for lv in ROW_LEVELS:
        cols += [f"bound_{lv}_before", f"bound_{lv}_after", f"bound_{lv}_changed"]
    return out.loc[order, cols].reset_index(drop=True)


def compare_kernels(before: pd.DataFrame, after: pd.DataFrame, *, per: str = "run",
                    steps: tuple[int | None, int | None] = (None, None)) -> pd.DataFrame:
    return join_kernels(*normalise(kernel_table(before), kernel_table(after), per, steps))


def range_table(report: pd.DataFrame) -> pd.DataFrame:
    return ranges_of(kernel_table(report))


def ranges_of(kernels: pd.DataFrame) -> pd.DataFrame:
    """Every NVTX range (each prefix of every nvtx_path, so outer ranges include their children):
    kernels, time, bytes per level, and the share of its time that is memory-bound at DRAM."""
    k = kernels.reset_index()
    rows: list[pd.DataFrame] = []
    paths = k["nvtx_path"].where(k["nvtx_path"] != "", NO_RANGE)
    parts = paths.str.split("/")
    depth = parts.str.len().max() if len(parts) else 0
    for d in range(1, int(depth or 0) + 1):
        has = parts.str.len() >= d
        if not has.any():
            continue
        sub = k[has].copy()
        sub["nvtx_range"] = parts[has].str[:d].str.join("/")
        sub["depth"] = d
        rows.append(sub)
    if not rows:
        return pd.DataFrame(columns=["nvtx_range", "depth", "kernels", "launches", "duration_s",
                                     *(f"bytes_{lv}" for lv in ROW_LEVELS), "memory_bound_share"])
    allk = pd.concat(rows, ignore_index=True)
    allk["mem_s"] = allk["duration_s"].where(_primary_bound(allk) == "memory", 0.0)
    agg = allk.groupby(["nvtx_range", "depth"], sort=True).agg(
        kernels=("function", "size"), launches=("launches", "sum"),
        duration_s=("duration_s", lambda s: s.sum(min_count=1)),
        **{f"bytes_{lv}": (f"bytes_{lv}", lambda s: s.sum(min_count=1)) for lv in ROW_LEVELS},
        mem_s=("mem_s", "sum"),
    )
    agg["memory_bound_share"] = agg["mem_s"] / agg["duration_s"]
    return agg.drop(columns="mem_s")


def _primary_bound(kernels: pd.DataFrame) -> pd.Series:
    """A kernel's bound at its DRAM row, or at its link row when it has one instead (a collective)."""
    return kernels["bound_dram"].where(kernels["bound_dram"] != "", kernels[f"bound_{LINK_LEVEL}"])


def join_ranges(a: pd.DataFrame, b: pd.DataFrame) -> pd.DataFrame:
    joined = a.join(b, how="outer", suffixes=("_before", "_after"))
    _changes(joined, ("kernels", "launches", "duration_s", "memory_bound_share"))
    cols = ["nvtx_range", "depth", "kernels_before", "kernels_after", "duration_s_before", "duration_s_after",
            "delta_s", "speedup",
            *(c for lv in ROW_LEVELS
              for c in (f"bytes_{lv}_before", f"bytes_{lv}_after", f"delta_bytes_{lv}")),
            "memory_bound_share_before", "memory_bound_share_after"]
    return joined.reset_index()[cols].sort_values(["nvtx_range"], kind="stable").reset_index(drop=True)


def compare_ranges(before: pd.DataFrame, after: pd.DataFrame, *, per: str = "run",
                   steps: tuple[int | None, int | None] = (None, None)) -> pd.DataFrame:
    a, b = normalise(kernel_table(before), kernel_table(after), per, steps)
    return join_ranges(ranges_of(a), ranges_of(b))


# ---------------------------------------------------------------- like with like


@dataclass
class Comparison:
    kernels: pd.DataFrame
    ranges: pd.DataFrame | None
    per: str  # run | step | launch: how the totals were made comparable
    steps: tuple[int | None, int | None]
    warnings: list[str] = field(default_factory=list)  # what differs between the runs besides the code
    on_cpu: bool = False  # both sides are CPU op profiles: "op time", not "kernel time"
    # the GPUs' busy time per side, normalised like the totals (summary.gpu_busy_s: kernels overlapping on
    # streams counted once); NaN where a side records no start times or --per launch
    busy_s: tuple[float, float] = (float("nan"), float("nan"))
    # how rows were paired: '' by function + NVTX path; 'module' by module and kind of op (a compiled run:
    # nsroof.report.compare_compiled), with the share of each side's costed rows matched
    by: str = ""
    matched_rows: tuple[float, float] = (float("nan"), float("nan"))


def compare(before: pd.DataFrame, after: pd.DataFrame, *, per: str = "auto", ranges: bool = True,
            metadata: tuple[dict[str, Any], dict[str, Any]] = ({}, {})) -> Comparison:
    """Two reports compared like with like: normalised (see the module docstring), with a warning for
    each difference that is not the code's — devices, ncu versions, clocks, step counts. A side with no
    rows is an NsroofError saying so in one line (empty_answer)."""
    answer = empty_answer(before, after)
    if answer:
        raise NsroofError(answer)
    steps = (steps_in(before, metadata[0]), steps_in(after, metadata[1]))
    from nsroof.report import compare_compiled as cc

    by, shares, notes = "", (float("nan"), float("nan")), []
    if cc.is_compiled(before) or cc.is_compiled(after):
        k = cc.keyed(before, after)
        by, shares, ranges = "module", cc.matched_rows(k), False
        notes.append(f"a compiled run: rows paired by module and kind of op, not by function; rows without "
                     f"a cost (views, autograd bookkeeping, torch.compile's wrappers) left out: "
                     f"{k.uncosted[0]} before, {k.uncosted[1]} after")
        before, after = k.before, k.after
    ka, kb = kernel_table(before), kernel_table(after)
    chosen = choose_per(per, ka, kb, steps)
    if by == "module" and chosen == "launch" and per == "auto":
        chosen = "run"  # a fused kernel replaces several eager calls: launch counts differ by design
    na, nb = normalise(ka, kb, chosen, steps)
    warnings = notes + differences(before, after, metadata, steps)
    differ = _launches_differ(ka, kb)
    if chosen == "run" and differ:
        warnings.append(f"launch counts differ for {differ} matched kernel(s): the totals compare different "
                        "amounts of work (--per launch or --per step)")
    cpu = (is_cpu(before), is_cpu(after))
    if cpu[0] != cpu[1]:
        warnings.append("one side is a CPU op profile, the other GPU kernels: their times are not the same "
                        "quantity")
    return Comparison(join_kernels(na, nb), join_ranges(ranges_of(na), ranges_of(nb)) if ranges else None,
                      chosen, steps, warnings, on_cpu=all(cpu), busy_s=_busy(before, after, chosen, steps),
                      by=by, matched_rows=shares)


def _busy(before: pd.DataFrame, after: pd.DataFrame, per: str, steps: tuple[int | None, int | None]
          ) -> tuple[float, float]:
    from nsroof.report.summary import gpu_busy_s, per_kernel

    if per == "launch":  # a launch-count scale has no meaning for a union of intervals
        return float("nan"), float("nan")
    scale = steps if per == "step" else (1, 1)
    a, b = (gpu_busy_s(per_kernel(r)) / (n or np.nan) for r, n in ((before, scale[0]), (after, scale[1])))
    return float(a), float(b)


def empty_answer(before: pd.DataFrame, after: pd.DataFrame,
                 names: tuple[str, str] = ("before", "after")) -> str:
    """The one-line answer when a side has no kernels (a trace without kernels gives such a report); '' when
    both have some."""
    from nsroof.schema import kernel_key

    if not before.empty and not after.empty:
        return ""
    if before.empty and after.empty:
        return f"nothing to compare: neither {names[0]} nor {names[1]} has any kernel"
    empty, full, frame = (names[0], names[1], after) if before.empty else (names[1], names[0], before)
    n = int(kernel_key(frame).nunique())
    return (f"nothing to compare: {empty} has no kernels ({full} has {n}; "
            f"every kernel is {'added' if before.empty else 'removed'})")


def is_cpu(report: pd.DataFrame) -> bool:
    """A CPU op profile (nsroof profile/demo on the CPU): every row an op call (kind cpu_op), or every
    duration torch.profiler's CPU time."""
    from nsroof.schema import cpu_ops_only

    if cpu_ops_only(report):
        return True
    src = (report["duration_source"].dropna().astype(str) if "duration_source" in report.columns
           else pd.Series([], dtype=object))
    return bool(len(src)) and bool(src.str.startswith("torch.profiler:cpu_time").all())


def differences(before: pd.DataFrame, after: pd.DataFrame, metadata: tuple[dict[str, Any], dict[str, Any]],
                steps: tuple[int | None, int | None]) -> list[str]:
    out: list[str] = []
    devices = [_distinct(r, "device") for r in (before, after)]
    if devices[0] and devices[1] and devices[0] != devices[1]:
        out.append(f"devices differ: {', '.join(devices[0])} vs {', '.join(devices[1])} — the change "
                   "includes the hardware")
    ncu = [_ncu_versions(m) for m in metadata]
    for kind in ("layout", "file version"):
        x, y = ncu[0][kind], ncu[1][kind]
        if x and y and x != y:
            out.append(f"ncu versions differ: {', '.join(sorted(x))} vs {', '.join(sorted(y))} — metric sets "
                       "and roofs may differ")
            break
    if devices[0] == devices[1]:
        out += _clock_differences(before, after)
    if steps[0] and steps[1] and steps[0] != steps[1]:
        out.append(f"step counts differ: {steps[0]} vs {steps[1]}")
    elif bool(steps[0]) != bool(steps[1]):
        known = "before" if steps[0] else "after"
        out.append(f"step count known for the {known} run only ({steps[0] or steps[1]})")
    return out


def _distinct(report: pd.DataFrame, col: str) -> list[str]:
    if col not in report.columns:
        return []
    return sorted({str(v) for v in report[col].dropna().unique() if str(v)})


# the CSV/text generation an ncu version writes (ncu-formats.md §versions): `Kernel Time` until 2022.3
_LAYOUT_ERA = {"old": "ncu ≤ 2022.3 (Kernel Time column)",
               "new": "ncu ≥ 2023 (Block/Grid Size, Device, CC columns)"}


def _ncu_versions(metadata: dict[str, Any]) -> dict[str, set[str]]:
    """Each side's ncu version evidence: the CSV/text layout generation and the .ncu-rep file version.
    The export kind (raw or details page, CSV or .ncu-rep) is no version: the same report in two kinds
    compares equal."""
    out: dict[str, set[str]] = {"layout": set(), "file version": set()}
    for rec in metadata.get("inputs") or []:
        if not isinstance(rec, dict) or not str(rec.get("format", "")).startswith("ncu"):
            continue
        if rec.get("layout") in _LAYOUT_ERA:
            out["layout"].add(_LAYOUT_ERA[str(rec["layout"])])
        if rec.get("report_file_version"):
            out["file version"].add(f".ncu-rep file version {rec['report_file_version']}")
    return out


def _clock_differences(before: pd.DataFrame, after: pd.DataFrame) -> list[str]:
    """ncu measures each kernel's roofs at the clock it ran at (peak per cycle × clock): on the same device,
    roofs that differ mean the clocks did."""
    out = []
    roofs = []
    for r in (before, after):
        if not {"ceiling_source", "precision", "peak_flop_per_s"} <= set(r.columns):
            roofs.append(pd.Series(dtype=float))
            continue
        ncu = r[r["ceiling_source"].astype(str).str.startswith("ncu:") & (r["precision"].astype(str) != "")]
        roofs.append(ncu.groupby(ncu["precision"].astype(str))["peak_flop_per_s"].median())
    for prec in roofs[0].index.intersection(roofs[1].index):
        x, y = float(roofs[0][prec]), float(roofs[1][prec])
        if x > 0 and y > 0 and abs(x - y) / max(x, y) > CLOCK_TOLERANCE:
            out.append(f"clocks differ: ncu measured the {prec} roof at {x / 1e12:.3g} vs {y / 1e12:.3g} "
                       "TFLOP/s (median; roof = peak per cycle × clock) — lock clocks, e.g. ncu "
                       "--clock-control base")
            break
    return out


# ---------------------------------------------------------------- text


def describe_per(c: Comparison) -> str:
    if c.per == "step":
        return (f"per step (before {c.steps[0]} steps, after {c.steps[1]}): every total divided by its run's "
                "step count")
    if c.per == "launch":
        return ("per launch: each matched kernel's before time, FLOPs and bytes scaled to the after run's "
                "launch count (before per launch × after launches)")
    return "as measured (per run)"


def render(kernels: pd.DataFrame | Comparison, ranges: pd.DataFrame | None = None, *, top: int = 20,
           before_name: str = "before", after_name: str = "after", width: int | None = None) -> str:
    """The comparison as text; the per-kernel lines' names cut in the middle and their NVTX paths to their
    innermost ranges, fitted to `width` (default: the terminal's)."""
    head: list[str] = []
    by_module = ((kernels.by == "module", kernels.matched_rows) if isinstance(kernels, Comparison)
                 else (False, (np.nan, np.nan)))
    what, time_word = "kernels", "kernel time"
    busy = kernels.busy_s if isinstance(kernels, Comparison) else (np.nan, np.nan)
    if isinstance(kernels, Comparison):
        c = kernels
        kernels, ranges = c.kernels, c.ranges
        head = [f"  normalised: {describe_per(c)}", *(f"  warning: {w}" for w in c.warnings)]
        if c.on_cpu:
            what, time_word = "ops", "op time"
    both = kernels[kernels["status"] == "both"]
    t_a = kernels["duration_s_before"].sum(min_count=1)
    t_b = kernels["duration_s_after"].sum(min_count=1)
    by, rows = _paired_by(what, by_module)
    lines = [
        f"compare {before_name} -> {after_name}",
        *head,
        f"  {what}: {len(both)} matched by {by},"
        f" {int((kernels['status'] == 'removed').sum())} only before, "
        f"{int((kernels['status'] == 'added').sum())} only after{rows}",
        f"  {time_word}: {_s(t_a)} -> {_s(t_b)} ({_signed_s(_nz(t_b) - _nz(t_a))}, speedup "
        f"{_ratio(t_a, t_b)})",
    ]
    if all(np.isfinite(busy)) and (busy[0] < 0.995 * _nz(t_a) or busy[1] < 0.995 * _nz(t_b)):
        lines.append(f"  GPU busy (kernels overlapping on streams counted once): {_s(busy[0])} -> "
                     f"{_s(busy[1])} ({_signed_s(busy[1] - busy[0])}, speedup {_ratio(busy[0], busy[1])})")
    for lv in ROW_LEVELS:
        ba, bb = kernels[f"bytes_{lv}_before"].sum(min_count=1), kernels[f"bytes_{lv}_after"].sum(min_count=1)
        if pd.notna(ba) or pd.notna(bb):
            lines.append(f"  {lv.upper():4} bytes: {human_bytes(ba)} -> {human_bytes(bb)}"
                         f"{_uncounted(kernels, lv)}")
    changed = {lv: int(kernels[f"bound_{lv}_changed"].sum()) for lv in ROW_LEVELS}
    if any(changed.values()):
        lines.append("  bound changed: " + ", ".join(f"{n} at {lv}" for lv, n in changed.items() if n))
    noun = "op" if what == "ops" else "kernel"
    lines += ["",
              f"  {'time before':>12} {'time after':>12} {'change':>11} {'speedup':>8}  "
              f"{'DRAM bytes before -> after':>28}  {'bound (DRAM)':<18} {noun} [NVTX path]"]
    from nsroof.names.kernel_names import fit_names, fit_tail
    from nsroof.report.summary import terminal_width

    shown = kernels.head(top)
    room = max(24, (width or terminal_width()) - 2 - 12 - 1 - 12 - 1 - 11 - 1 - 8 - 2 - 28 - 2 - 18 - 1)
    names = iter(fit_names([str(f) for f in shown["function"]], min(60, max(40, room // 2))))
    for r in shown.itertuples():
        # a collective has a link row where other kernels have a DRAM row: its line shows the link's
        # bytes and bound
        lv = LINK_LEVEL if _at_link(r) else "dram"
        bound = f"{getattr(r, f'bound_{lv}_before') or '-'}->{getattr(r, f'bound_{lv}_after') or '-'}" \
            if r.status == "both" else r.status
        bound += " link" if lv == LINK_LEVEL else ""
        name = next(names)
        # the NVTX path's innermost ranges (a profiled run's module) in what the name leaves of the line
        where = f" [{fit_tail(str(r.nvtx_path), max(32, room - len(name) - 3))}]" if r.nvtx_path else ""
        moved = " -> ".join(human_bytes(getattr(r, f"bytes_{lv}_{side}")) for side in ("before", "after"))
        lines.append(
            f"  {_s(r.duration_s_before):>12} {_s(r.duration_s_after):>12} {_signed_s(r.delta_s):>11} "
            f"{_ratio(r.duration_s_before, r.duration_s_after):>8}  {moved:>28}  {bound:<18} "
            f"{name}{where}"
        )
    if len(kernels) > top:
        lines.append(f"  ... {len(kernels) - top} more (--top N, or -o FILE for all rows)")
    if ranges is not None and len(ranges):
        lines += ["", "  per NVTX range:",
                  f"  {'time before':>12} {'time after':>12} {'change':>11} {'speedup':>8}  "
                  f"{'mem-bound share':>15}  range"]
        for r in ranges.itertuples():
            share = f"{_pct(r.memory_bound_share_before)}->{_pct(r.memory_bound_share_after)}"
            lines.append(
                f"  {_s(r.duration_s_before):>12} {_s(r.duration_s_after):>12} {_signed_s(r.delta_s):>11} "
                f"{_ratio(r.duration_s_before, r.duration_s_after):>8}  {share:>15}  "
                f"{'  ' * (int(r.depth) - 1)}{str(r.nvtx_range).split('/')[-1]}"
            )
    return "\n".join(lines)


def _paired_by(what: str, by_module: tuple[bool, tuple[float, float]]) -> tuple[str, str]:
    """How the rows were paired, and (by module) the share of each side's costed rows matched."""
    if not by_module[0]:
        return f"{'op' if what == 'ops' else 'function'} + NVTX path", ""
    shares = by_module[1]
    return "module + kind of op", (f"; costed rows matched: {_pct(shares[0])} of before's, "
                                   f"{_pct(shares[1])} of after's")


def _uncounted(kernels: pd.DataFrame, lv: str) -> str:
    """What a bytes total leaves out: the rows with time but no bytes (never counted as 0 bytes)."""
    out = []
    for side in ("before", "after"):
        gone = kernels[f"duration_s_{side}"].notna() & kernels[f"bytes_{lv}_{side}"].isna()
        if gone.any():
            out.append(f"{side}: {int(gone.sum())} rows without bytes "
                       f"({_s(float(kernels.loc[gone, f'duration_s_{side}'].sum()))}) not counted")
    return f" ({'; '.join(out)})" if out else ""


def _at_link(r: Any) -> bool:
    link = (getattr(r, f"bytes_{LINK_LEVEL}_before"), getattr(r, f"bytes_{LINK_LEVEL}_after"))
    return pd.isna(r.bytes_dram_before) and pd.isna(r.bytes_dram_after) and not all(pd.isna(v) for v in link)


def _nz(v: float) -> float:
    return 0.0 if pd.isna(v) else float(v)


def _s(v: float) -> str:
    return "—" if pd.isna(v) else human_time(float(v), decimals=3)


def _signed_s(v: float) -> str:
    if pd.isna(v):
        return "—"
    return ("+" if v > 0 else "-" if v < 0 else "±") + _s(abs(float(v)))


def _ratio(a: float, b: float) -> str:
    if pd.isna(a) or pd.isna(b) or not b:
        return "—"
    return f"{float(a) / float(b):.2f}x"


def _pct(v: float) -> str:
    return "—" if pd.isna(v) else f"{100 * float(v):.0f}%"
