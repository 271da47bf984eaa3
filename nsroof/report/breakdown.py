"""Where the run's time went, before any one kernel: per category of work (GEMM, attention, ...), per
recorded step (ops, gaps, waits, GPU busy and idle) and, in a generation run, prefill apart from decode. The
summary, the HTML overview and `nsroof analyze --by category|step|phase` read these tables."""

from __future__ import annotations

import re
from typing import Any

import numpy as np
import pandas as pd

from nsroof.names.categories import CATEGORIES, COPY_KINDS
from nsroof.schema import STEP_TIME_COLUMNS, cpu_ops_only
from nsroof.units import human_time

#: the columns of the per-category table (`nsroof analyze --by category`), in order
CATEGORY_COLUMNS: tuple[str, ...] = ("category", "kernels", "launches", "duration_s", "time_share", "bound",
                                     "bound_time_share", "time_floor_s", "roof_fraction", "headroom")
PHASE_COLUMNS: tuple[str, ...] = ("phase", *CATEGORY_COLUMNS[1:], "gemm_intensity", "gemm_ridge",
                                  "tokens_per_step", "batch_to_leave_memory_bound")


def _kernels(frame: pd.DataFrame) -> pd.DataFrame:
    """One row per kernel (nsroof.report.wide.kernel_rows) with its category (computed for a report written
    before the column existed)."""
    from nsroof.report.wide import kernel_rows

    k = kernel_rows(frame)
    if "category" not in k.columns or (k["category"].fillna("").astype(str) == "").all():
        from nsroof.roofs.classify import categories

        k["category"] = categories(k)
    k["category"] = k["category"].fillna("").astype(str).replace("", "other")
    return k.assign(duration_s=k["duration_s"].astype("float64").fillna(0.0),
                    launches=k["launches"].astype("float64").fillna(1.0))


def _grouped(k: pd.DataFrame, by: str, total: float) -> list[dict[str, Any]]:
    """Per group of `by`: kernels, launches, time and its share of `total`, the bound holding most of its
    time (a copy or set has none: '') and the roofline ratio of the group as a whole over its kernels with a
    floor: roof_fraction = Σ time_floor_s / Σ duration_s, headroom = its inverse."""
    floor = k["time_floor_s"].astype("float64")
    floored = floor.notna() & (floor > 0)
    rows = []
    for name, sub in k.groupby(by, sort=False):
        time = float(sub["duration_s"].sum())
        copy = sub["kind"].fillna("").astype(str).isin(COPY_KINDS) if "kind" in sub else False
        # a copy or set is never classified: its time holds no bound
        bound = sub["bound"].fillna("").astype(str).where(~copy, "")
        bound_time = sub["duration_s"].groupby(bound).sum().sort_values(ascending=False, kind="stable")
        has = sub[floored.loc[sub.index]]
        floor_s, time_s = float(has["time_floor_s"].sum()), float(has["duration_s"].sum())
        rows.append({
            by: name, "kernels": len(sub), "launches": int(sub["launches"].sum()), "duration_s": time,
            "time_share": time / total if total > 0 else np.nan,
            "bound": bound_time.index[0] if len(bound_time) else "",
            "bound_time_share": float(bound_time.iloc[0] / time) if time > 0 and len(bound_time) else np.nan,
            "time_floor_s": floor_s if len(has) else np.nan,
            "roof_fraction": floor_s / time_s if time_s > 0 else np.nan,
            "headroom": time_s / floor_s if floor_s > 0 else np.nan,
        })
    return rows


def category_table(frame: pd.DataFrame) -> pd.DataFrame:
    """The run's time per category, longest first; the durations sum to the run's time (Σ duration_s over
    every kernel, copy and set: the summary's headline)."""
    k = _kernels(frame)
    if k.empty:
        return pd.DataFrame(columns=list(CATEGORY_COLUMNS))
    out = pd.DataFrame(_grouped(k, "category", float(k["duration_s"].sum())), columns=list(CATEGORY_COLUMNS))
    rank = {c: i for i, c in enumerate(CATEGORIES)}
    out["_r"] = out["category"].map(rank).fillna(len(rank))
    return (out.sort_values(["duration_s", "_r"], ascending=[False, True], kind="stable")
            .drop(columns="_r").reset_index(drop=True))


def _ratio(value: float, suffix: str = "x") -> str:
    return f"{value:.3g}{suffix}" if np.isfinite(value) else "-"


def _bound(bound: str, share: float) -> str:
    if not bound:
        return "(copy/set)"
    return bound if not (np.isfinite(share) and share < 0.995) else f"{bound} {share:.0%}"


def category_lines(frame: pd.DataFrame, width: int = 80) -> list[str]:
    """The category table for the terminal: time, share, the bound of most of the time (with its share when
    not all), and the headroom = Σ time / Σ roofline floor over the category's kernels with a floor."""
    table = category_table(frame)
    if table.empty:
        return []
    lines = ["Time by category (bound: of most of its time; headroom = Σ time / Σ roofline floor)",
             f"  {'category':<18} {'ops' if cpu_ops_only(frame) else 'kernels':>7} {'time':>9} {'share':>6}  "
             f"{'bound':<14} {'headroom':>8}"]
    for _, r in table.iterrows():
        share = f"{r['time_share']:.1%}" if np.isfinite(r["time_share"]) else "?"
        lines.append(f"  {r['category']:<18} {int(r['kernels']):>7} {human_time(r['duration_s']):>9} "
                     f"{share:>6}  {_bound(str(r['bound']), r['bound_time_share']):<14} "
                     f"{_ratio(r['headroom']):>8}")
    return lines


# --------------------------------------------------------------------------------------------- steps


def step_table(metadata: dict[str, Any]) -> pd.DataFrame:
    """Every input's recorded steps (STEP_TIME_COLUMNS: metadata inputs[i].facts.step_time), with its
    source."""
    rows = [{"source": str(i.get("name", "")), **r}
            for i in metadata.get("inputs") or [] if isinstance(i, dict)
            for r in ((i.get("facts") or {}).get("step_time") or [])]
    table = pd.DataFrame(rows, columns=["source", *STEP_TIME_COLUMNS])
    for c in STEP_TIME_COLUMNS:
        if c != "step":
            table[c] = table[c].astype("float64")
    return table


_ENGINE_STEP = re.compile(r"context_(\d+)\(.*\)_generation_(\d+)\(")


def step_label(step: str, width: int = 12) -> str:
    """A step's short name: N, or an engine step's request counts ('ctx 1 gen 0')."""
    m = _ENGINE_STEP.search(step)
    text = f"ctx {m.group(1)} gen {m.group(2)}" if m else step
    from nsroof.names.kernel_names import fit_name

    return fit_name(text, width)


def step_lines(metadata: dict[str, Any], width: int = 80, top: int = 10) -> list[str]:
    """Per step: wall time, time in ops, the time no op covers and its share, split into waits (gaps of 1 ms
    or more) and the gaps between ops; the DataLoader and the GPU busy (streams once) and idle where the run
    has them. The gaps between ops (= outside - waits) go first when `width` is short."""
    table = step_table(metadata)
    if table.empty:
        return []
    columns = [("wall", "wall_s"), ("in ops", "op_s"), ("outside", "outside_ops_s"), ("%", ""),
               ("waits", "waits_s"), ("between", "between_ops_s")]
    if (table["dataloader_s"] > 0).any():
        columns.append(("DataLoader", "dataloader_s"))
    if table["gpu_busy_s"].notna().any():
        columns += [("GPU busy", "gpu_busy_s"), ("GPU idle", "gpu_idle_s")]
    if 2 + 12 + 9 * len(columns) > width:
        columns.remove(("between", "between_ops_s"))

    def cell(name: str, column: str, r: Any) -> str:
        w = max(8, len(name)) if column else 4
        text = human_time(r[column]) if column else f"{r['outside_ops_share']:.0%}"
        return f" {text:>{w}}"

    gpu = ("GPU busy", "gpu_busy_s") in columns
    lines = ["Step time (outside: no op running; waits: gaps ≥ 1 ms" + ("; GPU busy: streams once)" if gpu
                                                                       else ")"),
             f"  {'step':<12}" + "".join(f" {name:>{max(8, len(name)) if column else 4}}"
                                        for name, column in columns)]
    shown = table.head(top)
    for _, r in shown.iterrows():
        lines.append(f"  {step_label(str(r['step'])):<12}" + "".join(cell(n, c, r) for n, c in columns))
    if len(table) > len(shown):
        lines.append(f"  … {len(table) - len(shown)} more steps (`nsroof analyze --by step --json` lists "
                     "all)")
    lines.append(_step_verdict(table))
    return lines


def _step_verdict(table: pd.DataFrame) -> str:
    """One line over all steps: the share of the wall time no op covered (and of it in waits), in the
    DataLoader, and the share of the GPU's stretch it sat idle."""
    wall = float(table["wall_s"].sum())
    if not wall > 0:
        return f"  over {len(table)} step(s): no wall time"
    outside, waits = float(table["outside_ops_s"].sum()), float(table["waits_s"].sum())
    text = (f"{outside / wall:.0%} of the wall time no op running ({waits / wall:.0%} in waits of 1 ms or "
            "more)")
    loader = float(table["dataloader_s"].sum())
    text += f"; {loader / wall:.0%} in the DataLoader" if loader > 0 else ""
    if table["gpu_busy_s"].notna().any():
        busy, idle = float(table["gpu_busy_s"].sum()), float(table["gpu_idle_s"].sum())
        text += f"; the GPU idle {idle / (busy + idle):.0%} of its stretch" if busy + idle > 0 else ""
    return f"  over {len(table)} step(s): {text}"


# --------------------------------------------------------------------------------------------- phases


def phase_table(frame: pd.DataFrame) -> pd.DataFrame:
    """Prefill apart from decode (the report's `phase`): per phase the category table's columns, and for its
    GEMMs the intensity (Σ flops / Σ DRAM bytes), the ridge they run under, the tokens per forward pass and
    the batch that would leave the memory-bound regime: batch × ridge / intensity (a decode GEMM's intensity
    grows with the batch, I = 2·batch / weight bytes per element while weights dominate its bytes, so this is
    the seed's ridge · bytes / 2, nsroof.roofs.ledger_analysis.batch_for_compute_bound). Empty when the run
    is no generation run."""
    if "phase" not in frame.columns or not (frame["phase"].fillna("").astype(str) != "").any():
        return pd.DataFrame(columns=list(PHASE_COLUMNS))
    k = _kernels(frame)
    k = k[k["phase"].fillna("").astype(str) != ""]
    rows = _grouped(k, "phase", float(k["duration_s"].sum()))
    for row in rows:
        sub = k[k["phase"] == row["phase"]]
        row |= _gemm_facts(sub, str(row["phase"]))
    return pd.DataFrame(rows, columns=list(PHASE_COLUMNS))


def _gemm_facts(sub: pd.DataFrame, phase: str) -> dict[str, float]:
    from nsroof.costs.phases import token_count

    gemm = sub[sub["category"] == "GEMM"]
    flops = float(gemm["flops"].astype("float64").sum()) if len(gemm) else np.nan
    dram = float(gemm["bytes_dram"].astype("float64").sum()) if "bytes_dram" in gemm and len(gemm) else np.nan
    intensity = flops / dram if dram > 0 else np.nan
    ridges = gemm["ridge_dram"].astype("float64").dropna() if "ridge_dram" in gemm else pd.Series([], float)
    ridge = float(ridges.median()) if len(ridges) else np.nan
    lookups = sub[sub["op"].fillna("").astype(str) == "aten::embedding"]
    tokens = [t for t in (token_count(str(s)) for s in lookups["input_shapes"].fillna("")) if t]
    batch = float(np.median(tokens)) if tokens else np.nan
    # only a decode pass's GEMM intensity grows with its batch (a prompt's grows with its length too)
    leave = batch * ridge / intensity if intensity > 0 and phase == "decode" else np.nan
    return {"gemm_intensity": intensity, "gemm_ridge": ridge, "tokens_per_step": batch,
            "batch_to_leave_memory_bound": leave}


def phase_lines(frame: pd.DataFrame) -> list[str]:
    table = phase_table(frame)
    if table.empty:
        return []
    rows = "ops" if cpu_ops_only(frame) else "kernels"
    lines = ["Prefill vs decode (`phase`; GEMM FLOP/B = Σ FLOPs / Σ DRAM bytes of the phase's GEMMs)",
             f"  {'phase':<8} {rows:>7} {'time':>9} {'share':>6}  {'bound':<14} {'headroom':>8} "
             f"{'GEMM FLOP/B':>11} {'ridge':>7}"]
    for _, r in table.iterrows():
        lines.append(f"  {r['phase']:<8} {int(r['kernels']):>7} {human_time(r['duration_s']):>9} "
                     f"{r['time_share']:>6.1%}  {_bound(str(r['bound']), r['bound_time_share']):<14} "
                     f"{_ratio(r['headroom']):>8} {_ratio(r['gemm_intensity'], ''):>11} "
                     f"{_ratio(r['gemm_ridge'], ''):>7}")
    decode = table[table["phase"] == "decode"]
    for _, r in decode.iterrows():
        if np.isfinite(r["batch_to_leave_memory_bound"]):
            batch = r["batch_to_leave_memory_bound"]
            lines.append(f"  decode: {r['tokens_per_step']:.0f} token(s) a step; its GEMMs leave the memory-"
                         f"bound regime at a batch of ~{batch:.0f} (batch × ridge / GEMM FLOP/B)")
    return lines


# ------------------------------------------------------------------------------------- ops and modules

#: the per-op table's columns: one row per op and input shapes (an op-less kernel: its function name)
OP_AGGREGATE_COLUMNS: tuple[str, ...] = ("op", "input_shapes", "module", "category", *CATEGORY_COLUMNS[1:])
MODULE_AGGREGATE_COLUMNS: tuple[str, ...] = ("module", "category", *CATEGORY_COLUMNS[1:])


def _text(k: pd.DataFrame, name: str) -> pd.Series:
    return (k[name].fillna("").astype(str) if name in k.columns
            else pd.Series("", index=k.index, dtype=object))


def _aggregate(k: pd.DataFrame, keys: list[str], columns: tuple[str, ...]) -> pd.DataFrame:
    """_grouped over the distinct `keys`; each group's other text columns (module, category) are those of its
    longest kernel."""
    if k.empty:
        return pd.DataFrame(columns=list(columns))
    k = k.assign(_key=k[keys].astype(str).agg("\x00".join, axis=1))
    rows = pd.DataFrame(_grouped(k, "_key", float(k["duration_s"].sum())))
    longest = k.sort_values("duration_s", ascending=False, kind="stable").drop_duplicates("_key")
    texts = [c for c in columns if c in longest.columns and c not in rows.columns]
    out = rows.merge(longest[["_key", *texts]], on="_key", how="left")
    return out.sort_values("duration_s", ascending=False, kind="stable")[list(columns)].reset_index(drop=True)


def op_table(frame: pd.DataFrame) -> pd.DataFrame:
    """Time per op and input shapes, longest first (the kernels an op call launched counted under it; a
    kernel no op launched under its own function name), with its module, category, bound and headroom."""
    k = _kernels(frame)
    function = _text(k, "function").where(_text(k, "function") != "", _text(k, "kernel_name"))
    k = k.assign(op=_text(k, "op").where(_text(k, "op") != "", function),
                 input_shapes=_text(k, "input_shapes"), module=_text(k, "module"))
    return _aggregate(k, ["op", "input_shapes"], OP_AGGREGATE_COLUMNS)


def module_table(frame: pd.DataFrame) -> pd.DataFrame:
    """Time per nn.Module (its own ops: a parent's row holds what no child module ran), longest first; empty
    when the report names no module."""
    k = _kernels(frame)
    k = k.assign(module=_text(k, "module"))
    if not (k["module"] != "").any():
        return pd.DataFrame(columns=list(MODULE_AGGREGATE_COLUMNS))
    k["module"] = k["module"].replace("", "(no module)")
    return _aggregate(k, ["module"], MODULE_AGGREGATE_COLUMNS)
