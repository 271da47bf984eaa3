"""Measured vs compulsory: join a report with the analytic ledger.

    mapping = load_mapping("ledger.yaml")          # YAML or JSON; bad files -> InputError(file, line)
    report  = apply(report_df, mapping)            # fills ledger_op ... headroom (nsroof.schema)
    table   = gain_table(report)                   # kernels and NVTX ranges by duration - ideal time
    matched, total = coverage(report)

Mapping file (YAML shown; JSON has the same shape):

    dtype: fp32                      # default dtype for rules that give none (optional)
    rules:                           # first matching rule wins; a top-level list is the rules alone
      - kernel: 'gemm_v0<float>'     # regex searched in kernel_name
        formula: gemm                # any `nsroof ledger` formula
        shape: {m: 40960, n: 40960, k: 20480}
      - nvtx: 'aten::addmm'          # regex searched in nvtx_path (also: op, searched in the op column)
        formula: gemm-bias
        shape: {m: 'sizes[1][0]', k: 'sizes[1][1]', n: 'sizes[2][1]', bias_elements: 'sizes[0][0]'}
      - nvtx: 'aten::'
        formula: aten                # the formula the collectors map that aten op to, on its recorded sizes

`sizes[i][j]` (products with `*` allowed) reads input i, dimension j of the op that launched the
kernel: from the innermost NVTX marker torch.autograd.profiler.emit_nvtx(record_shapes=True) wrote
(`aten::addmm, seq = 5, op_id = 72, sizes = [[256], [64, 128], [128, 256]], input_op_ids = ...`), or
from the report's input_shapes column (torch.profiler traces).

Columns (per kernel row; the same on each of its level rows; × launches for aggregated rows):
    expected_flops = ledger FLOPs;  min_bytes = ledger compulsory DRAM bytes
    flop_ratio     = flops / expected_flops
    excess_traffic = measured DRAM bytes / min_bytes
    ideal_time_s   = max(expected_flops / peak_flop_per_s, min_bytes / DRAM bandwidth)
    headroom       = duration_s / ideal_time_s
The roofs are the report's own (the kernel's precision roof and its DRAM row's bandwidth, with their
ceiling_source); where the report has none, the formula's roof on `machine` (or the packaged profile
matched from the device name). A rule that matches but cannot be evaluated leaves NaN and says why
in `missing` as `ledger: <reason>`, and once per rule in the returned frame's
attrs["ledger"]["warnings"] (one line each: file:line of the rule, how many kernels, the first one,
the expression and why), next to attrs["ledger"]["matched"] and ["kernels"].
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from nsroof.costs.ledger_map.rules import AUTO, Mapping, Rule, load_mapping
from nsroof.costs.ledger_map.shapes import op_and_sizes, parse_input_shapes, parse_markers, size_value
from nsroof.errors import NsroofError
from nsroof.frames.columns import texts
from nsroof.frames.distinct import group_rows, row_codes
from nsroof.schema import kernel_key

if TYPE_CHECKING:
    from nsroof.costs.ledger import Operator
    from nsroof.roofs.machines import Machine

__all__ = ["AUTO", "LEDGER_COLUMNS", "GAIN_COLUMNS", "Mapping", "Match", "Rule", "apply", "coverage",
           "evaluate", "gain_table", "load_mapping", "parse_input_shapes", "parse_markers"]
# ledger dtype -> the dtype string torch.profiler records, for the collectors' aten readers
_TORCH_DTYPE = {"fp32": "float", "fp64": "double", "fp16": "c10::Half", "bf16": "c10::BFloat16",
                "fp8": "c10::Float8_e4m3fn", "int64": "long int", "int32": "int", "int8": "signed char"}


@dataclass(frozen=True)
class Match:
    label: str
    flops: float
    bytes: float
    roof: Any  # ledger Roof, or None for 'aten' matches
    reason: str  # why NaN ('' when evaluated)


def evaluate(rule: Rule, nvtx_path: str, op: str, input_shapes: str) -> Match:
    """The ledger cost of one launch under `rule`; NaN with a reason when the shape is not available."""
    from nsroof.costs import ledger

    op_name, sizes = op_and_sizes(rule, nvtx_path, op, input_shapes)
    if rule.formula == AUTO:
        from nsroof.costs.ledger.aten import READERS, base_name, op_cost

        if sizes is None:
            return Match("", math.nan, math.nan, None, f"no recorded sizes for {op_name or 'the op'}")
        dtypes = [_TORCH_DTYPE.get(rule.dtype or "", rule.dtype or "")] * len(sizes)
        cost = op_cost(op_name, sizes, dtypes)
        if not cost.known:
            return Match("", math.nan, math.nan, None, cost.missing)
        # op_cost succeeded, so its reader does too: it gives the Operator, whose roof the ideal time may need
        roof = READERS[base_name(op_name)](sizes, dtypes, []).roof
        return Match(rule.name or cost.label, cost.flops, cost.bytes, roof, "")
    try:
        shape = {k: size_value(k, v, sizes) for k, v in rule.shape.items()}
        operator: Operator = ledger.operator(rule.formula, **shape)
    except LookupError as exc:
        return Match("", math.nan, math.nan, None, str(exc.args[0]))
    except NsroofError as exc:
        return Match("", math.nan, math.nan, None, str(exc))
    return Match(rule.name or operator.label, operator.flops, operator.bytes, operator.roof, "")


# --------------------------------------------------------------------------- the join


LEDGER_COLUMNS = ("ledger_op", "expected_flops", "min_bytes", "flop_ratio", "excess_traffic", "ideal_time_s",
                  "headroom")


def _num(frame: pd.DataFrame, column: str, default: float = math.nan) -> pd.Series:
    if column not in frame:
        return pd.Series(default, index=frame.index, dtype="float64")
    return pd.to_numeric(frame[column], errors="coerce").astype("float64")


def apply(report_df: pd.DataFrame, mapping: Mapping, *, machine: Machine | None = None) -> pd.DataFrame:
    """The report with ledger_op, expected_flops, min_bytes, flop_ratio, excess_traffic, ideal_time_s
    and headroom filled for every kernel a rule matches (NaN / '' for the rest)."""
    frame = report_df.copy()
    n = len(frame)
    launches = _num(frame, "launches", 1.0).fillna(1.0)
    codes, rules, results = _evaluate_all(frame, mapping)

    def per_row(values: list[Any], dtype: str) -> np.ndarray:
        return np.array(values, dtype=dtype)[codes] if n else np.array([], dtype=dtype)

    label = per_row([("" if r is None else r.label) for r in results], "object")
    per_flops = per_row([math.nan if r is None else r.flops for r in results], "float64")
    expected = per_flops * launches.to_numpy()
    min_bytes = (per_row([math.nan if r is None else r.bytes for r in results], "float64")
                 * launches.to_numpy())
    measured_dram, peak, bandwidth = _roofs(frame, results, codes, per_flops, machine)
    with np.errstate(divide="ignore", invalid="ignore"):
        compute_s = np.where(expected == 0, 0.0, expected / peak)
        memory_s = np.where(min_bytes == 0, 0.0, min_bytes / bandwidth)
        ideal = np.fmax(compute_s, memory_s)
        ideal = np.where(np.isnan(compute_s) | np.isnan(memory_s), np.nan, ideal)
        flops = _num(frame, "flops").to_numpy()
        flop_ratio = np.where(expected > 0, flops / expected, np.nan)
        excess = np.where(min_bytes > 0, measured_dram / min_bytes, np.nan)
        duration = _num(frame, "duration_s").to_numpy()
        headroom = np.where(ideal > 0, duration / ideal, np.nan)

    frame["ledger_op"] = pd.Series(label, index=frame.index, dtype=object)
    for name, values in (("expected_flops", expected), ("min_bytes", min_bytes), ("flop_ratio", flop_ratio),
                         ("excess_traffic", excess), ("ideal_time_s", ideal), ("headroom", headroom)):
        frame[name] = pd.Series(values, index=frame.index, dtype="float64")

    # A rule that matched but could not be evaluated says why.
    reasons = per_row([("" if r is None else r.reason) for r in results], "object")
    if n and any(reasons):
        missing = texts(frame, "missing")
        why = np.array([("ledger: " + r.replace(",", ";")) if r else "" for r in reasons], dtype=object)
        joined = [", ".join(x for x in (a, b) if x) for a, b in zip(missing, why, strict=True)]
        frame["missing"] = pd.Series(joined, index=frame.index, dtype=object)
    matched, total = coverage(frame)
    warnings = _rule_warnings(frame, mapping, rules, results, codes)
    frame.attrs = dict(frame.attrs) | {"ledger": {"mapping": mapping.path, "matched": matched,
                                                  "kernels": total, "warnings": warnings}}
    return frame


def _evaluate_all(frame: pd.DataFrame,
                  mapping: Mapping) -> tuple[np.ndarray, list[Rule | None], list[Match | None]]:
    """One evaluation per distinct (kernel, nvtx path, op, input shapes): reports repeat them per level and
    launch. Returns each row's code into the per-combination rules and results."""
    combos = pd.DataFrame({"k": texts(frame, "kernel_name"), "n": texts(frame, "nvtx_path"),
                           "o": texts(frame, "op"), "s": texts(frame, "input_shapes")})
    codes, uniques = pd.factorize(pd.MultiIndex.from_frame(combos))
    results: list[Match | None] = []
    rules: list[Rule | None] = []
    for k, nv, o, s in uniques:
        rule = mapping.first_match(k, nv, o)
        rules.append(rule)
        results.append(None if rule is None else evaluate(rule, nv, o, s))
    return codes, rules, results


def _roofs(frame: pd.DataFrame, results: list[Match | None], codes: np.ndarray, per_flops: np.ndarray,
           machine: Machine | None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per row: the kernel's measured DRAM bytes, its compute roof and DRAM bandwidth. Measured bytes and
    bandwidth come from each kernel's dram row; where the report has no roof, the formula's roof on the
    machine (given, or matched from the device name)."""
    keys = kernel_key(frame)
    dram = frame.loc[texts(frame, "level") == "dram"]
    dram_keys = keys.loc[dram.index].to_numpy()
    dram_bytes = pd.Series(_num(dram, "bytes").to_numpy(), index=dram_keys)
    dram_bw = pd.Series(_num(dram, "bandwidth_bytes_per_s").to_numpy(), index=dram_keys)
    measured_dram = keys.map(dram_bytes[~dram_bytes.index.duplicated()]).astype("float64").to_numpy()
    bandwidth = keys.map(dram_bw[~dram_bw.index.duplicated()]).astype("float64").to_numpy().copy()
    peak = _num(frame, "peak_flop_per_s").to_numpy().copy()
    need = np.isnan(peak) | np.isnan(bandwidth)
    if need.any():
        from nsroof.roofs import ceilings

        devices = texts(frame, "device")
        found: dict[str, Machine | None] = {}
        for i in np.flatnonzero(need & ~np.isnan(per_flops)):
            if machine is None and devices[i] not in found:
                found[devices[i]] = ceilings.machine_of(devices[i])
            m = machine if machine is not None else found[devices[i]]
            if m is None:
                continue
            result = results[codes[i]]
            if math.isnan(peak[i]) and result is not None and result.roof is not None:
                from nsroof.roofs.ledger_analysis import roof_ceiling

                peak[i] = roof_ceiling(m, result.roof).value
            if math.isnan(bandwidth[i]):
                bandwidth[i] = m.bandwidth_bytes_per_s.get("dram", math.nan)
    return measured_dram, peak, bandwidth


def _rule_warnings(frame: pd.DataFrame, mapping: Mapping, rules: list[Rule | None],
                   results: list[Match | None], codes: np.ndarray) -> list[str]:
    """One line per rule that matched kernels it could not evaluate (first-match-wins: those kernels get no
    other rule): where the rule is, how many kernels, the first of them in report order and why."""
    failed: dict[int, list[int]] = {}  # rule index -> distinct (kernel, nvtx, op, shapes) it failed on
    for u, (rule, result) in enumerate(zip(rules, results, strict=True)):
        if rule is not None and result is not None and result.reason:
            failed.setdefault(rule.index, []).append(u)
    if not failed:
        return []
    keys = kernel_key(frame).to_numpy()
    function, kernel_name = texts(frame, "function"), texts(frame, "kernel_name")
    source, kernel_id = texts(frame, "source"), texts(frame, "kernel_id")
    out = []
    for index in sorted(failed):
        rule = mapping.rules[index]
        rows = np.flatnonzero(np.isin(codes, failed[index]))
        first = int(rows[0])
        name = function[first] or kernel_name[first] or "(unnamed)"
        where = f"{mapping.path}:{rule.line}" if rule.line else mapping.path
        result = results[int(codes[first])]
        reason = result.reason if result is not None else ""
        out.append(f"{where}: rule {index + 1} ({rule.name or rule.formula}) matched "
                   f"{len(set(keys[rows]))} kernel(s) but could not evaluate them; first: {name} "
                   f"({source[first]} kernel {kernel_id[first]}): {reason}")
    return out


def coverage(report_df: pd.DataFrame) -> tuple[int, int]:
    """(kernels a ledger rule matched and evaluated, kernels in the report)."""
    if len(report_df) == 0:
        return 0, 0
    keys = kernel_key(report_df)
    ok = _num(report_df, "expected_flops").notna()
    return int(keys[ok].nunique()), int(keys.nunique())


# --------------------------------------------------------------------------- the gain table


GAIN_COLUMNS = ["kind", "name", "ledger_op", "kernels", "launches", "duration_s", "ideal_time_s", "gain_s",
                "headroom", "unmatched_kernels"]


def gain_table(report_df: pd.DataFrame) -> pd.DataFrame:
    """Kernels and NVTX ranges ranked by the time that could be gained, Σ(duration_s − ideal_time_s)
    over their ledger-matched launches; `unmatched_kernels` counts those left out (no formula).

    kind 'kernel': one row per kernel name and ledger op; kind 'nvtx': one row per NVTX range at every
    depth (a range includes the kernels of its inner ranges)."""
    if len(report_df) == 0:
        return pd.DataFrame(columns=GAIN_COLUMNS)
    level = texts(report_df, "level")
    keys = kernel_key(report_df)
    # One row per kernel: its dram row when the report has one, else its first row.
    order = np.where(level == "dram", 0, 1)
    one = report_df.assign(_key=keys.to_numpy(), _order=order).sort_values("_order", kind="stable")
    one = one.drop_duplicates("_key")
    kernels = pd.DataFrame({
        "name": texts(one, "kernel_name"),
        "ledger_op": texts(one, "ledger_op"),
        "nvtx_path": texts(one, "nvtx_path"),
        "launches": _num(one, "launches", 1.0).fillna(1.0).to_numpy(),
        "duration_s": _num(one, "duration_s").to_numpy(),
        "ideal_time_s": _num(one, "ideal_time_s").to_numpy(),
    })
    matched = kernels["ideal_time_s"].notna() & kernels["duration_s"].notna()
    kernels["gain_s"] = (kernels["duration_s"] - kernels["ideal_time_s"]).where(matched)

    rows: list[dict[str, Any]] = []
    # sums per group over numpy slices in row order (what a pandas group's .sum() adds, in the same order)
    columns = {c: kernels[c].to_numpy() for c in ("launches", "duration_s", "ideal_time_s", "gain_s")}
    is_matched = matched.to_numpy()
    good = np.flatnonzero(is_matched)
    names, ops = kernels["name"].to_numpy(dtype=object), kernels["ledger_op"].to_numpy(dtype=object)
    # groups in order of first appearance, as groupby(sort=False)
    code, first = row_codes(names[good], ops[good])
    for f, members in zip(first.tolist(), group_rows(code, len(first)), strict=True):
        rows.append(_gain_row("kernel", str(names[good[f]]), str(ops[good[f]]), columns, good[members], 0))
    # Every NVTX range at every depth, with the matched kernels under it: the ranges of each distinct
    # path once.
    paths = kernels["nvtx_path"].to_numpy(dtype=object)
    path_code, path_first = row_codes(paths)
    path_rows = group_rows(path_code, len(path_first))
    # range -> codes of the paths under it, ranges in order of first appearance
    ranges: dict[str, list[int]] = {}
    for c, f in enumerate(path_first.tolist()):
        path = paths[f]
        parts = [s for s in str(path).split("/") if s] if path else []
        for depth in range(1, len(parts) + 1):
            ranges.setdefault("/".join(parts[:depth]), []).append(c)
    for path, codes in ranges.items():
        # the rows of its paths in row order (the sums add in that order): a range costs its own rows, not
        # a pass over every kernel (a trace of many steps has thousands of ranges)
        slices = [path_rows[c] for c in codes]
        idx = slices[0] if len(slices) == 1 else np.sort(np.concatenate(slices))
        under = idx[is_matched[idx]]
        if len(under):
            rows.append(_gain_row("nvtx", path, "", columns, under, int(len(idx) - len(under))))
    table = pd.DataFrame(rows, columns=GAIN_COLUMNS)
    if len(table) == 0:
        return table
    table = table.astype({"kind": object, "name": object, "ledger_op": object, "kernels": "int64",
                          "launches": "int64", "duration_s": "float64", "ideal_time_s": "float64",
                          "gain_s": "float64", "headroom": "float64", "unmatched_kernels": "int64"})
    return table.sort_values("gain_s", ascending=False, kind="stable").reset_index(drop=True)


def _gain_row(kind: str, name: str, op: str, columns: dict[str, np.ndarray], rows: np.ndarray,
              unmatched: int) -> dict[str, Any]:
    duration = float(columns["duration_s"][rows].sum())
    ideal = float(columns["ideal_time_s"][rows].sum())
    return {
        "kind": kind, "name": name, "ledger_op": op, "kernels": int(len(rows)),
        "launches": int(columns["launches"][rows].sum()), "duration_s": duration, "ideal_time_s": ideal,
        "gain_s": float(columns["gain_s"][rows].sum()),
        "headroom": duration / ideal if ideal > 0 else math.nan, "unmatched_kernels": unmatched,
    }
