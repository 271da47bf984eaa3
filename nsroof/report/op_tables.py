"""The op tables of the summaries: `nsroof profile`'s ops and modules by time (top_ops, top_modules and
their tables) and `nsroof analyze`'s op-level rows of a trace, one per op and input shapes (op_lines). One
statistic per table, said in its header; names fitted to the width, distinct ones kept distinct
(nsroof.names.kernel_names.fit_names)."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from nsroof.names.kernel_names import fit_names
from nsroof.schema import LINK_LEVEL
from nsroof.units import human_time


def fit_line(line: str, width: int) -> str:
    """A line wider than `width` wrapped at spaces, its continuation indented past its own indent (a word
    longer than a line, such as a metric list, is broken)."""
    if len(line) <= width:
        return line
    import textwrap

    indent = " " * (len(line) - len(line.lstrip()))
    return "\n".join(textwrap.wrap(line, width, subsequent_indent=indent + "  ", break_on_hyphens=False))


def bound_cell(bound: str, fraction: float, compact: bool = False) -> str:
    """A table cell of a bound and its roof fraction: 'memory 86%' ('mem 86%' compact), '-' where no row."""
    if bound in ("", "nan"):  # no row at this level (a collective's link row stands for its dram row)
        return "-"
    if bound == "unknown":
        return "unknown"
    frac = f" {fraction:.0%}" if np.isfinite(fraction) else ""
    word = {"memory": "mem", "compute": "comp"}.get(bound, bound) if compact else bound
    return f"{word}{frac}"


def top_ops(report: pd.DataFrame, top: int = 10) -> pd.DataFrame:
    """Per op name, all its calls together (one statistic for every column): calls, total time, share,
    FLOPs and bytes of the costed calls, intensity = Σ FLOPs / Σ bytes and its bound against the ridge of
    the op's longest call, roof = Σ time floor / Σ time of the calls with a floor (the time-weighted mean
    of their roof fractions)."""
    r = report.copy()
    r["op_key"] = r["op"].astype(str).where(r["op"].astype(str) != "", r["kernel_name"].astype(str))
    r["duration_s"] = r["duration_s"].astype("float64").fillna(0.0)
    total = r["duration_s"].sum()
    rows = []
    for op, g in r.groupby("op_key", sort=False):
        t = g["duration_s"].sum()
        flops, nbytes = (g[c].astype("float64") for c in ("flops", "bytes"))
        costed = flops.notna() & nbytes.notna()
        w, q = float(flops[costed].sum()), float(nbytes[costed].sum())
        intensity = w / q if q > 0 else (math.inf if w > 0 else math.nan)
        ridge = float(g["ridge"].astype("float64").iloc[int(np.argmax(g["duration_s"].to_numpy()))])
        bound = ("unknown" if not costed.any() or not np.isfinite(ridge) or math.isnan(intensity)
                 else "memory" if intensity < ridge else "compute")
        floor = g["time_floor_s"].astype("float64")
        has_floor = floor.notna() & (g["duration_s"] > 0)
        floor_time = float(g.loc[has_floor, "duration_s"].sum())
        rows.append({
            "op": op, "calls": len(g), "time_s": t, "share": t / total if total > 0 else math.nan,
            "bound": bound, "roof_fraction": float(floor[has_floor].sum()) / floor_time if floor_time > 0
            else math.nan, "flops": w if costed.any() else math.nan, "intensity": intensity,
        })
    out = pd.DataFrame(rows, columns=["op", "calls", "time_s", "share", "bound", "roof_fraction", "flops",
                                      "intensity"])
    return out.sort_values("time_s", ascending=False).head(top).reset_index(drop=True)


def top_modules(report: pd.DataFrame, top: int = 5) -> pd.DataFrame:
    """Per innermost module: time, share, the bound carrying most of its time and the memory/compute split."""
    r = report[report["module"].astype(str) != ""]
    total = float(report["duration_s"].astype("float64").fillna(0.0).sum())
    rows = []
    for module, g in r.groupby(r["module"].astype(str), sort=False):
        d = g["duration_s"].astype("float64").fillna(0.0)
        t = float(d.sum())
        by_bound = d.groupby(g["bound"].astype(str)).sum()
        rows.append({"module": module, "time_s": t, "share": t / total if total > 0 else math.nan,
                     "bound": str(by_bound.idxmax()) if len(by_bound) else "unknown",
                     "memory": float(by_bound.get("memory", 0.0)) / t if t > 0 else math.nan,
                     "compute": float(by_bound.get("compute", 0.0)) / t if t > 0 else math.nan})
    out = pd.DataFrame(rows, columns=["module", "time_s", "share", "bound", "memory", "compute"])
    return out.sort_values("time_s", ascending=False).head(top).reset_index(drop=True)


def op_table(ops: pd.DataFrame, width: int) -> list[str]:
    if not len(ops):
        return []
    fixed = 2 + 1 + 6 + 1 + 9 + 1 + 6 + 2 + 8 + 1 + 5 + 1 + 8
    name_w = max(12, min(width - fixed, int(ops["op"].astype(str).str.len().max())))
    names = fit_names(ops["op"].astype(str).tolist(), name_w)
    lines = [*(fit_line(line, width) for line in (
                 f"Top {len(ops)} ops by time, all calls of an op together (DRAM, analytic bytes)",
                 "  (FLOP/B = Σ FLOPs / Σ bytes, bound: FLOP/B vs the ridge, roof = Σ floor / Σ time)")),
             f"  {'op':<{name_w}} {'calls':>6} {'time':>9} {'share':>6}  {'bound':<8} {'roof':>5} "
             f"{'FLOP/B':>8}"]
    for name, (_, row) in zip(names, ops.iterrows(), strict=True):
        frac = f"{row['roof_fraction']:.0%}" if np.isfinite(row["roof_fraction"]) else "-"
        inten = f"{row['intensity']:.3g}" if not math.isnan(row["intensity"]) else "-"
        lines.append(f"  {name:<{name_w}} {row['calls']:>6} {human_time(row['time_s']):>9} "
                     f"{row['share']:>6.1%}  "
                     f"{row['bound']:<8} {frac:>5} {inten:>8}")
    return lines


def module_table(modules: pd.DataFrame, width: int) -> list[str]:

    if not len(modules):
        return []
    fixed = 2 + 1 + 9 + 1 + 6 + 2 + 8 + 1 + len("memory 100% / compute 100%")
    name_w = max(12, min(width - fixed, int(modules["module"].astype(str).str.len().max())))
    names = fit_names(modules["module"].astype(str).tolist(), name_w, keep="tail")
    lines = ["", "Top modules by time (forward and backward; bound: the one holding most of the module's "
             "time)"]
    for name, (_, row) in zip(names, modules.iterrows(), strict=True):
        lines.append(f"  {name:<{name_w}} {human_time(row['time_s']):>9} {row['share']:>6.1%}  "
                     f"{row['bound']:<8} memory {row['memory']:.0%} / compute {row['compute']:.0%}")
    return lines


def op_lines(ops: pd.DataFrame | None, top: int, width: int = 80, *, cpu: bool = False) -> list[str]:
    """The op-level view's costed ops by time (a trace's REPORT.ops.parquet), the calls of one op and shape
    together, the shapes shown: their kernels' summed time and their formula's whole FLOPs, so the rate is
    right even where a helper kernel carries none of them. One intensity per group (one shape), so one
    bound; its roof fraction is the group's, Σ time floor / Σ time (a time-weighted mean of its calls'). The
    ops of a CPU profile (`cpu`) launch no kernels: no kernels column."""
    if ops is None or not len(ops) or not ops["flops"].notna().any():
        return []
    costed = ops[ops["flops"].notna()]
    floor = costed["time_floor_s"].astype("float64")
    costed = costed.assign(floored_s=costed["duration_s"].astype("float64").where(floor.notna()),
                           floor_s=floor, shapes=compact_shapes(costed["input_shapes"]) if "input_shapes"
                           in costed else "")
    groups = costed.groupby([costed["op"].astype(str), costed["flops_source"].astype(str)], sort=False,
                            observed=True)
    # a call of unknown time (its kernels not recorded) makes the group's time unknown, never 0 s
    table = groups.agg(time=("duration_s", lambda s: s.sum(skipna=False)), flops=("flops", "sum"),
                       calls=("op", "size"), kernels=("launches", "sum"), bound=("bound", "first"),
                       floor=("floor_s", "sum"), floored=("floored_s", "sum"), level=("level", "first"),
                       shapes=("shapes", "first"))
    table = table.sort_values("time", ascending=False).head(top)
    links = bool((table["level"] == LINK_LEVEL).any())
    fixed = 2 + 1 + 9 + 1 + 6 + (0 if cpu else 1 + 7) + 1 + 9 + 2 + 12 + 5 * links  # 'compute 100%'
    ops_text = [str(op) for op, _ in table.index]
    shapes = table["shapes"].astype(str).tolist()
    op_w = max(12, min(max(len(o) for o in ops_text), max(16, (width - fixed) * 11 // 20)))
    shape_w = max(0, min(max(len(x) for x in shapes + ["input shapes"]), width - fixed - op_w - 1))
    names = fit_names(ops_text, op_w)
    shown = fit_names(shapes, shape_w) if shape_w >= 8 else [""] * len(shapes)
    shape_col = f" {'input shapes':<{shape_w}}" if shape_w >= 8 else ""
    kernels_col = "" if cpu else f" {'kernels':>7}"
    lines = ["",
             f"Top {len(table)} costed ops by time, one row per op and input shapes (op-level rows)",
             "  (summed over the calls: time, the formula's FLOPs; roof = Σ time floor / Σ time)",
             f"  {'op':<{op_w}}{shape_col} {'time':>9} {'calls':>6}{kernels_col} {'FLOP/s':>9}  "
             f"DRAM{'/link' if links else ''}"]
    for i, (_, r) in enumerate(table.iterrows()):
        rate = r["flops"] / r["time"] if r["time"] > 0 else np.nan
        fraction = r["floor"] / r["floored"] if r["floored"] > 0 else np.nan
        shape = f" {shown[i]:<{shape_w}}" if shape_col else ""
        kernels = "" if cpu else f" {int(r['kernels']):>7}"
        lines.append(f"  {names[i]:<{op_w}}{shape} {human_time(r['time']):>9} {int(r['calls']):>6}{kernels} "
                     f"{(f'{rate:.3g}' if np.isfinite(rate) else '?'):>9}  "
                     f"{bound_cell(r['bound'], fraction)}{' link' if r['level'] == LINK_LEVEL else ''}")
    return lines


def compact_shapes(shapes: pd.Series) -> pd.Series:
    """Recorded input shapes as a table shows them: `[[384], [512, 128], [], []]` -> `384 512x128` (the
    empty shapes of scalar arguments dropped; a text that is no list of shapes kept as it is)."""
    import json

    def one(text: str) -> str:
        try:
            value = json.loads(text)
        except ValueError:
            return text
        if not isinstance(value, list):
            return text
        parts = ["x".join(str(d) for d in shape) if isinstance(shape, list) else str(shape)
                 for shape in value if shape != []]
        return " ".join(parts)

    values = shapes.astype(object).where(shapes.notna(), "").astype(str)
    distinct = {v: one(v) for v in pd.unique(values.to_numpy(dtype=object))}
    return values.map(distinct)
