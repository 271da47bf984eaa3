"""Before/after comparison of two reports (or datasets, or raw exports): per kernel matched by
function name + NVTX path, and per NVTX range, the change in time, in bytes per level, in bound.

The NVTX path is keyed without torch emit_nvtx's `seq = …`, `op_id = …` and `input_op_ids = …`
counters (nsroof.importers.nvtx.stable_nvtx_path): they shift whenever one op is added upstream, so
with them nothing would match after a code change. `sizes = …` stays: a new shape is a different call.

Kernels with the same (function, nvtx_path) are merged on each side first (launch counts add up),
so a change in launch count shows as a change in `launches`, not as unmatched rows. A kernel's bound
at a level, after merging, is the bound that holds for most of its time there (time-weighted
majority; a tie goes to the bound met first in report order).
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pandas as pd

from nsroof.errors import InputError
from nsroof.schema import LEVELS

KEY: tuple[str, str] = ("function", "nvtx_path")
NO_RANGE = "(no NVTX range)"


def load_side(path: str | os.PathLike[str], *, machine: object = None) -> pd.DataFrame:
    """A report file, a dataset folder, or an export to analyze now."""
    from nsroof.report import parquet

    p = Path(path)
    if not p.exists():
        raise InputError(p, "no such file or directory", hint="pass a report (.parquet), a dataset folder or an export")
    if p.is_dir() or _is_parquet(p):
        frame = parquet.load(p)
    else:
        from nsroof.pipeline import analyze

        frame = analyze([p], machine=machine).frame  # type: ignore[arg-type]
    missing = [c for c in ("function", "nvtx_path", "level", "duration_s", "bytes", "bound") if c not in frame.columns]
    if missing:
        raise InputError(p, f"not an nsroof report: lacks columns {', '.join(missing)}", hint="run `nsroof analyze` on it first")
    return frame


def _is_parquet(p: Path) -> bool:
    with open(p, "rb") as fh:
        return fh.read(4) == b"PAR1"


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
    for level in LEVELS:
        at = df[df["level"] == level]
        if at.empty:
            base[f"bytes_{level}"] = np.nan
            base[f"bound_{level}"] = ""
            continue
        base[f"bytes_{level}"] = at.groupby(list(KEY), sort=False)["bytes"].sum(min_count=1)
        base[f"bound_{level}"] = _majority_bound(at)
    base[[f"bound_{lv}" for lv in LEVELS]] = base[[f"bound_{lv}" for lv in LEVELS]].fillna("")
    return base


def _stable_paths(paths: pd.Series) -> pd.Series:
    """Each distinct path rewritten once (a report repeats each path on every launch and level)."""
    from nsroof.importers.nvtx import stable_nvtx_path

    mapping = {p: stable_nvtx_path(p) for p in paths.unique()}
    return paths.map(mapping).astype(object)


def _majority_bound(at: pd.DataFrame) -> pd.Series:
    weights = at.assign(w=at["duration_s"].fillna(0.0), bound=at["bound"].replace("", "unknown"))
    per = weights.groupby([*KEY, "bound"], sort=False)["w"].sum().reset_index()
    per = per.sort_values([*KEY, "w"], ascending=[True, True, False], kind="stable")
    return per.drop_duplicates(subset=list(KEY)).set_index(list(KEY))["bound"]


def _changes(joined: pd.DataFrame, numeric: tuple[str, ...]) -> None:
    """On a before/after outer join: the numeric columns (and bytes per level) as numbers, then the time
    change `delta_s` (a side that is absent counts 0 s), `speedup` = before / after, and `delta_bytes_<level>`."""
    for col in (*numeric, *(f"bytes_{lv}" for lv in LEVELS)):
        joined[f"{col}_before"] = pd.to_numeric(joined[f"{col}_before"], errors="coerce")
        joined[f"{col}_after"] = pd.to_numeric(joined[f"{col}_after"], errors="coerce")
    joined["delta_s"] = joined["duration_s_after"].fillna(0.0) - joined["duration_s_before"].fillna(0.0)
    joined["speedup"] = joined["duration_s_before"] / joined["duration_s_after"]
    for lv in LEVELS:
        joined[f"delta_bytes_{lv}"] = joined[f"bytes_{lv}_after"] - joined[f"bytes_{lv}_before"]


def compare_kernels(before: pd.DataFrame, after: pd.DataFrame) -> pd.DataFrame:
    """Per kernel: before/after launches, time, bytes and bound at each level, the changes, and
    `status` both | removed (only before) | added (only after); sorted by |time change|."""
    a, b = kernel_table(before), kernel_table(after)
    joined = a.join(b, how="outer", suffixes=("_before", "_after"))
    in_a = joined.index.isin(a.index)
    in_b = joined.index.isin(b.index)
    joined["status"] = np.select([in_a & in_b, in_a], ["both", "removed"], "added")
    _changes(joined, ("launches", "duration_s", "flops"))
    for lv in LEVELS:
        for side in ("before", "after"):
            joined[f"bound_{lv}_{side}"] = joined[f"bound_{lv}_{side}"].astype(object).where(
                joined[f"bound_{lv}_{side}"].notna(), "")
        # a real shift between memory and compute; gaining or losing a roof ('unknown') is not one
        known = joined[f"bound_{lv}_before"].isin(["memory", "compute"]) & joined[f"bound_{lv}_after"].isin(["memory", "compute"])
        joined[f"bound_{lv}_changed"] = known & (joined[f"bound_{lv}_before"] != joined[f"bound_{lv}_after"])
    out = joined.reset_index()
    order = out["delta_s"].abs().sort_values(ascending=False, kind="stable").index
    cols = ["function", "nvtx_path", "status", "launches_before", "launches_after", "duration_s_before",
            "duration_s_after", "delta_s", "speedup"]
    for lv in LEVELS:
        cols += [f"bytes_{lv}_before", f"bytes_{lv}_after", f"delta_bytes_{lv}"]
    for lv in LEVELS:
        cols += [f"bound_{lv}_before", f"bound_{lv}_after", f"bound_{lv}_changed"]
    return out.loc[order, cols].reset_index(drop=True)


def range_table(report: pd.DataFrame) -> pd.DataFrame:
    """Every NVTX range (each prefix of every nvtx_path, so outer ranges include their children):
    kernels, time, bytes per level, and the share of its time that is memory-bound at DRAM."""
    k = kernel_table(report).reset_index()
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
                                     *(f"bytes_{lv}" for lv in LEVELS), "memory_bound_share"])
    allk = pd.concat(rows, ignore_index=True)
    allk["mem_s"] = allk["duration_s"].where(allk["bound_dram"] == "memory", 0.0)
    agg = allk.groupby(["nvtx_range", "depth"], sort=True).agg(
        kernels=("function", "size"), launches=("launches", "sum"),
        duration_s=("duration_s", lambda s: s.sum(min_count=1)),
        **{f"bytes_{lv}": (f"bytes_{lv}", lambda s: s.sum(min_count=1)) for lv in LEVELS},
        mem_s=("mem_s", "sum"),
    )
    agg["memory_bound_share"] = agg["mem_s"] / agg["duration_s"]
    return agg.drop(columns="mem_s")


def compare_ranges(before: pd.DataFrame, after: pd.DataFrame) -> pd.DataFrame:
    a, b = range_table(before), range_table(after)
    joined = a.join(b, how="outer", suffixes=("_before", "_after"))
    _changes(joined, ("kernels", "launches", "duration_s", "memory_bound_share"))
    cols = ["nvtx_range", "depth", "kernels_before", "kernels_after", "duration_s_before", "duration_s_after",
            "delta_s", "speedup", *(c for lv in LEVELS for c in (f"bytes_{lv}_before", f"bytes_{lv}_after", f"delta_bytes_{lv}")),
            "memory_bound_share_before", "memory_bound_share_after"]
    return joined.reset_index()[cols].sort_values(["nvtx_range"], kind="stable").reset_index(drop=True)


# ---------------------------------------------------------------- text


def render(kernels: pd.DataFrame, ranges: pd.DataFrame | None = None, *, top: int = 20,
           before_name: str = "before", after_name: str = "after") -> str:
    both = kernels[kernels["status"] == "both"]
    t_a = kernels["duration_s_before"].sum(min_count=1)
    t_b = kernels["duration_s_after"].sum(min_count=1)
    lines = [
        f"compare {before_name} -> {after_name}",
        f"  kernels: {len(both)} matched by function + NVTX path, {int((kernels['status'] == 'removed').sum())} only before,"
        f" {int((kernels['status'] == 'added').sum())} only after",
        f"  GPU time: {_s(t_a)} -> {_s(t_b)} ({_signed_s(_nz(t_b) - _nz(t_a))}, speedup {_ratio(t_a, t_b)})",
    ]
    for lv in LEVELS:
        ba, bb = kernels[f"bytes_{lv}_before"].sum(min_count=1), kernels[f"bytes_{lv}_after"].sum(min_count=1)
        if pd.notna(ba) or pd.notna(bb):
            lines.append(f"  {lv.upper():4} bytes: {_b(ba)} -> {_b(bb)}")
    changed = {lv: int(kernels[f"bound_{lv}_changed"].sum()) for lv in LEVELS}
    if any(changed.values()):
        lines.append("  bound changed: " + ", ".join(f"{n} at {lv}" for lv, n in changed.items() if n))
    lines += ["", f"  {'time before':>12} {'time after':>12} {'change':>11} {'speedup':>8}  {'DRAM bytes before -> after':>28}  {'bound (DRAM)':<18} kernel [NVTX path]"]
    for r in kernels.head(top).itertuples():
        bound = f"{r.bound_dram_before or '-'}->{r.bound_dram_after or '-'}" if r.status == "both" else r.status
        where = f" [{r.nvtx_path}]" if r.nvtx_path else ""
        lines.append(
            f"  {_s(r.duration_s_before):>12} {_s(r.duration_s_after):>12} {_signed_s(r.delta_s):>11} {_ratio(r.duration_s_before, r.duration_s_after):>8}"
            f"  {_b(r.bytes_dram_before) + ' -> ' + _b(r.bytes_dram_after):>28}  {bound:<18} {str(r.function)[:60]}{where}"
        )
    if len(kernels) > top:
        lines.append(f"  ... {len(kernels) - top} more (--top N, or -o FILE for all rows)")
    if ranges is not None and len(ranges):
        lines += ["", "  per NVTX range:", f"  {'time before':>12} {'time after':>12} {'change':>11} {'speedup':>8}  {'mem-bound share':>15}  range"]
        for r in ranges.itertuples():
            share = f"{_pct(r.memory_bound_share_before)}->{_pct(r.memory_bound_share_after)}"
            lines.append(
                f"  {_s(r.duration_s_before):>12} {_s(r.duration_s_after):>12} {_signed_s(r.delta_s):>11} {_ratio(r.duration_s_before, r.duration_s_after):>8}"
                f"  {share:>15}  {'  ' * (int(r.depth) - 1)}{str(r.nvtx_range).split('/')[-1]}"
            )
    return "\n".join(lines)


def _nz(v: float) -> float:
    return 0.0 if pd.isna(v) else float(v)


def _s(v: float) -> str:
    if pd.isna(v):
        return "—"
    v = float(v)
    if abs(v) >= 1:
        return f"{v:.3f} s"
    if abs(v) >= 1e-3:
        return f"{v * 1e3:.3f} ms"
    return f"{v * 1e6:.2f} us"


def _signed_s(v: float) -> str:
    if pd.isna(v):
        return "—"
    return ("+" if v > 0 else "-" if v < 0 else "±") + _s(abs(float(v)))


def _ratio(a: float, b: float) -> str:
    if pd.isna(a) or pd.isna(b) or not b:
        return "—"
    return f"{float(a) / float(b):.2f}x"


def _b(v: float) -> str:
    if pd.isna(v):
        return "—"
    v = float(v)
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if abs(v) >= scale:
            return f"{v / scale:.2f} {unit}"
    return f"{v:.0f} B"


def _pct(v: float) -> str:
    return "—" if pd.isna(v) else f"{100 * float(v):.0f}%"
