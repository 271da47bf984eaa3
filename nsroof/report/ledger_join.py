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

import ast
import json
import math
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from nsroof.errors import InputError, NsroofError
from nsroof.schema import kernel_key

if TYPE_CHECKING:
    from nsroof.models.ledger import Operator
    from nsroof.models.machines import Machine

AUTO = "aten"  # formula name meaning: whatever the collectors map the marker's aten op to
RULE_KEYS = ("kernel", "nvtx", "op", "formula", "shape", "dtype", "name")
_SIZE_TERM = re.compile(r"^sizes\[(\d+)\]\[(-?\d+)\]$")
_MARKER = re.compile(
    r"(?P<op>[A-Za-z_][\w.:]*), seq = (?P<seq>\d+)(?:, op_id = (?P<op_id>\d+))?"
    r", sizes = (?P<sizes>\[(?:\s*\[[-\d,\s]*\]\s*,?)*\s*\])"
)
_BARE_MARKER = re.compile(r"([A-Za-z_][\w.:]*), seq = \d+")
# ledger dtype -> the dtype string torch.profiler records, for the collectors' aten readers
_TORCH_DTYPE = {"fp32": "float", "fp64": "double", "fp16": "c10::Half", "bf16": "c10::BFloat16",
                "fp8": "c10::Float8_e4m3fn", "int64": "long int", "int32": "int", "int8": "signed char"}


# --------------------------------------------------------------------------- the mapping


@dataclass(frozen=True)
class Rule:
    index: int  # 0-based position in the file
    line: int | None  # where the rule starts in the file
    formula: str
    kernel: re.Pattern[str] | None = None
    nvtx: re.Pattern[str] | None = None
    op: re.Pattern[str] | None = None
    shape: dict[str, Any] = field(default_factory=dict)  # literals or size expressions (strings)
    dtype: str | None = None
    name: str = ""  # optional label shown instead of the formula label

    def matches(self, kernel_name: str, nvtx_path: str, op: str) -> bool:
        return all(
            pattern is None or pattern.search(text) is not None
            for pattern, text in ((self.kernel, kernel_name), (self.nvtx, nvtx_path), (self.op, op))
        )


@dataclass(frozen=True)
class Mapping:
    path: str
    rules: tuple[Rule, ...]

    def first_match(self, kernel_name: str, nvtx_path: str, op: str) -> Rule | None:
        for rule in self.rules:
            if rule.matches(kernel_name, nvtx_path, op):
                return rule
        return None


def load_mapping(path: str | os.PathLike[str]) -> Mapping:
    """Read and validate a YAML or JSON mapping; every problem is an InputError naming file and line."""
    p = Path(path)
    if p.is_dir():
        raise InputError(p, "is a directory, not a ledger mapping", hint="pass a .yaml or .json file")
    try:
        text = p.read_text(encoding="utf-8-sig")
    except FileNotFoundError:
        raise InputError(p, "no such ledger mapping file", hint="check the path") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(p, f"cannot read ledger mapping ({exc.__class__.__name__})",
                         hint="a mapping is a UTF-8 YAML or JSON file") from None
    if not text.strip():
        raise InputError(p, "empty ledger mapping", line=1, hint="give at least one rule (see nsroof.report.ledger_join)")
    if p.suffix.lower() == ".json":
        try:
            json.loads(text)
        except json.JSONDecodeError as exc:
            raise InputError(p, f"invalid JSON ({exc.msg})", line=exc.lineno, hint="fix the JSON syntax") from None
    node = _compose(p, text)
    return _parse(p, node)


def _compose(p: Path, text: str) -> Any:
    import yaml

    try:
        return yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        raise InputError(p, f"invalid YAML ({exc.problem or exc.context})",
                         line=mark.line + 1 if mark else None, hint="fix the syntax") from None
    except yaml.YAMLError as exc:
        raise InputError(p, f"invalid YAML ({exc})", hint="fix the syntax") from None


def _line(node: Any) -> int:
    return int(node.start_mark.line) + 1


def _plain(node: Any) -> Any:
    """A composed YAML node as plain Python (scalars resolved by the safe constructor)."""
    import yaml

    return yaml.SafeLoader(yaml.serialize(node)).get_single_data()


def _parse(p: Path, root: Any) -> Mapping:
    import yaml

    default_dtype: str | None = None
    if isinstance(root, yaml.MappingNode):
        keys = {k.value: (k, v) for k, v in root.value}
        unknown = [k for k in keys if k not in ("rules", "dtype")]
        if unknown:
            k, _ = keys[unknown[0]]
            raise InputError(p, f"unknown top-level key {unknown[0]!r}", line=_line(k),
                             hint="a mapping has 'rules' (a list) and optionally 'dtype'")
        if "rules" not in keys:
            raise InputError(p, "no 'rules' list", line=_line(root), hint="add rules: [{kernel: REGEX, formula: NAME, shape: {...}}]")
        if "dtype" in keys:
            default_dtype = _dtype(p, keys["dtype"][1])
        rules_node = keys["rules"][1]
    else:
        rules_node = root
    if not isinstance(rules_node, yaml.SequenceNode):
        raise InputError(p, "rules must be a list", line=_line(rules_node) if rules_node is not None else 1,
                         hint="each rule is {kernel|nvtx|op: REGEX, formula: NAME, shape: {...}}")
    if not rules_node.value:
        raise InputError(p, "no rules", line=_line(rules_node), hint="give at least one rule")
    rules = tuple(_rule(p, i, n, default_dtype) for i, n in enumerate(rules_node.value))
    return Mapping(os.fspath(p), rules)


def _dtype(p: Path, node: Any) -> str:
    from nsroof.models.ledger import LedgerError, canonical_dtype

    try:
        return canonical_dtype(str(_plain(node)))
    except LedgerError as exc:
        raise InputError(p, str(exc), line=_line(node)) from None


def _rule(p: Path, index: int, node: Any, default_dtype: str | None) -> Rule:
    import yaml

    from nsroof.models import ledger

    if not isinstance(node, yaml.MappingNode):
        raise InputError(p, f"rule {index + 1} is not a mapping", line=_line(node),
                         hint="each rule is {kernel|nvtx|op: REGEX, formula: NAME, shape: {...}}")
    fields: dict[str, tuple[Any, Any]] = {}
    for k, v in node.value:
        key = str(k.value)
        if key not in RULE_KEYS:
            raise InputError(p, f"rule {index + 1}: unknown key {key!r}", line=_line(k),
                             hint=f"accepted: {', '.join(RULE_KEYS)}")
        fields[key] = (k, v)
    patterns: dict[str, re.Pattern[str]] = {}
    for key in ("kernel", "nvtx", "op"):
        if key in fields:
            value = _plain(fields[key][1])
            if not isinstance(value, str) or not value:
                raise InputError(p, f"rule {index + 1}: {key} must be a non-empty regex string", line=_line(fields[key][1]))
            try:
                patterns[key] = re.compile(value)
            except re.error as exc:
                raise InputError(p, f"rule {index + 1}: bad {key} regex {value!r} ({exc.msg})",
                                 line=_line(fields[key][1]), hint="escape ( ) [ ] < > * + ? with \\ where meant literally") from None
    if not patterns:
        raise InputError(p, f"rule {index + 1} matches nothing: give kernel, nvtx or op", line=_line(node))
    if "formula" not in fields:
        raise InputError(p, f"rule {index + 1}: no formula", line=_line(node),
                         hint=f"one of: {AUTO}, {', '.join(ledger.names())}")
    formula_node = fields["formula"][1]
    formula = str(_plain(formula_node))
    name = str(_plain(fields["name"][1])) if "name" in fields else ""
    dtype = _dtype(p, fields["dtype"][1]) if "dtype" in fields else default_dtype

    shape: dict[str, Any] = {}
    if "shape" in fields:
        shape_node = fields["shape"][1]
        if not isinstance(shape_node, yaml.MappingNode):
            raise InputError(p, f"rule {index + 1}: shape must be a mapping of parameter: value",
                             line=_line(shape_node))
        for k, v in shape_node.value:
            value = _plain(v)
            if isinstance(value, str) and "sizes" in value:
                try:
                    _parse_expression(value)
                except ValueError as exc:
                    raise InputError(p, f"rule {index + 1}: {k.value}: {exc}", line=_line(v),
                                     hint="write sizes[i][j], or a product like sizes[0][0]*sizes[0][1]") from None
            shape[str(k.value).replace("-", "_")] = value

    if formula == AUTO:
        if shape:
            raise InputError(p, f"rule {index + 1}: formula '{AUTO}' takes its shape from the op's recorded sizes; "
                             "drop 'shape' or name a formula", line=_line(fields["shape"][0]))
        if dtype is None:
            raise InputError(p, f"rule {index + 1}: formula '{AUTO}' needs a dtype (NVTX markers do not record one)",
                             line=_line(node), hint="add dtype: fp32 (or bf16, fp16, ...) to the rule or the file")
        return Rule(index, _line(node), formula, patterns.get("kernel"), patterns.get("nvtx"), patterns.get("op"),
                    {}, dtype, name)

    try:
        spec = ledger.get(formula)
    except ledger.LedgerError as exc:
        raise InputError(p, f"rule {index + 1}: {exc}", line=_line(formula_node)) from None
    params = {prm.name: prm for prm in spec.params}
    for key, value in shape.items():
        if key not in params:
            raise InputError(p, f"rule {index + 1}: {formula} has no parameter {key!r}", line=_line(node),
                             hint=f"accepted: {', '.join(params)}")
        if not (isinstance(value, str) and "sizes" in value):
            try:
                params[key].coerce(value, formula)
            except ledger.LedgerError as exc:
                raise InputError(p, f"rule {index + 1}: {exc}", line=_line(node)) from None
    if "dtype" in params and "dtype" not in shape:
        if dtype is None:
            raise InputError(p, f"rule {index + 1}: no dtype for {formula}", line=_line(node),
                             hint="add dtype: fp32 (or bf16, fp16, ...) to the rule or at the top of the file")
        shape["dtype"] = dtype
    elif dtype is not None and "dtype" not in params and "dtype" in fields:
        raise InputError(p, f"rule {index + 1}: {formula} has no dtype parameter", line=_line(fields["dtype"][0]),
                         hint=f"give its dtypes in shape ({', '.join(n for n in params if 'dtype' in n)})")
    missing = [prm.name for prm in spec.params if prm.required and prm.name not in shape]
    if missing:
        raise InputError(p, f"rule {index + 1}: {formula} needs {', '.join(missing)} in shape", line=_line(node))
    return Rule(index, _line(node), spec.name, patterns.get("kernel"), patterns.get("nvtx"), patterns.get("op"),
                shape, dtype, name)


def _parse_expression(text: str) -> list[tuple[int, int] | int]:
    """'sizes[1][0]*sizes[2][1]' -> [(1, 0), (2, 1)]; integer literals allowed as factors."""
    factors: list[tuple[int, int] | int] = []
    for part in text.replace(" ", "").split("*"):
        m = _SIZE_TERM.match(part)
        if m:
            factors.append((int(m.group(1)), int(m.group(2))))
        elif part.isdigit():
            factors.append(int(part))
        else:
            raise ValueError(f"cannot read size expression {text!r}")
    return factors


# --------------------------------------------------------------------------- shapes from NVTX / input_shapes


@dataclass(frozen=True)
class Marker:
    op: str
    seq: int
    op_id: int | None
    sizes: list[list[int]]


def parse_markers(nvtx_path: str) -> list[Marker]:
    """Every emit_nvtx marker with recorded sizes in an NVTX path, outermost first."""
    out = []
    for m in _MARKER.finditer(nvtx_path or ""):
        try:
            sizes = ast.literal_eval(m.group("sizes"))
        except (ValueError, SyntaxError):
            continue
        out.append(Marker(m.group("op"), int(m.group("seq")),
                          int(m.group("op_id")) if m.group("op_id") else None,
                          [list(map(int, s)) for s in sizes]))
    return out


def parse_input_shapes(text: str) -> list[list[int]] | None:
    """torch.profiler's input_shapes string '[[64, 128], [128, 256], []]' -> lists; None when unreadable."""
    if not text or not isinstance(text, str):
        return None
    try:
        value = ast.literal_eval(text)
    except (ValueError, SyntaxError):
        return None
    if not isinstance(value, (list, tuple)):
        return None
    out = []
    for item in value:
        if isinstance(item, (list, tuple)) and all(isinstance(x, int) for x in item):
            out.append(list(item))
        else:
            out.append([])  # a scalar or a tensor list: no shape
    return out


def _op_and_sizes(rule: Rule, nvtx_path: str, op: str, input_shapes: str) -> tuple[str, list[list[int]] | None]:
    markers = parse_markers(nvtx_path)
    if rule.nvtx is not None:
        chosen = [mk for mk in markers if rule.nvtx.search(mk.op)] or markers
    else:
        chosen = markers
    if rule.op is not None:
        chosen = [mk for mk in chosen if rule.op.search(mk.op)] or chosen
    if chosen:
        innermost = chosen[-1]
        return innermost.op, innermost.sizes
    shapes = parse_input_shapes(input_shapes)
    if shapes is None and not op:
        # a marker without recorded sizes (emit_nvtx without record_shapes) still names the op
        bare = _BARE_MARKER.findall(nvtx_path or "")
        op = bare[-1] if bare else op
    return op, shapes


def _evaluate(name: str, value: Any, sizes: list[list[int]] | None) -> Any:
    """A shape parameter's value: a literal as is, a size expression on the recorded sizes. LookupError
    names the parameter, its expression and what the sizes lack."""
    if not (isinstance(value, str) and "sizes" in value):
        return value
    if sizes is None:
        raise LookupError(f"{name} = {value}: no recorded sizes (NVTX marker or input_shapes)")
    product = 1
    for factor in _parse_expression(value):
        if isinstance(factor, int):
            product *= factor
            continue
        i, j = factor
        if not -len(sizes) <= i < len(sizes):
            raise LookupError(f"{name} = {value}: no input {i} in the recorded sizes {sizes} "
                              f"({len(sizes)} input(s))")
        if not -len(sizes[i]) <= j < len(sizes[i]):
            raise LookupError(f"{name} = {value}: input {i} of the recorded sizes {sizes} has no dimension {j}")
        product *= sizes[i][j]
    return product


@dataclass(frozen=True)
class Match:
    label: str
    flops: float
    bytes: float
    roof: Any  # ledger Roof, or None for 'aten' matches
    reason: str  # why NaN ('' when evaluated)


def evaluate(rule: Rule, nvtx_path: str, op: str, input_shapes: str) -> Match:
    """The ledger cost of one launch under `rule`; NaN with a reason when the shape is not available."""
    from nsroof.models import ledger

    op_name, sizes = _op_and_sizes(rule, nvtx_path, op, input_shapes)
    if rule.formula == AUTO:
        from nsroof.models.ledger.aten import READERS, base_name, op_cost

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
        shape = {k: _evaluate(k, v, sizes) for k, v in rule.shape.items()}
        operator: Operator = ledger.operator(rule.formula, **shape)
    except LookupError as exc:
        return Match("", math.nan, math.nan, None, str(exc.args[0]))
    except NsroofError as exc:
        return Match("", math.nan, math.nan, None, str(exc))
    return Match(rule.name or operator.label, operator.flops, operator.bytes, operator.roof, "")


# --------------------------------------------------------------------------- the join


LEDGER_COLUMNS = ("ledger_op", "expected_flops", "min_bytes", "flop_ratio", "excess_traffic", "ideal_time_s", "headroom")


def _text(frame: pd.DataFrame, column: str) -> pd.Series:
    if column not in frame:
        return pd.Series("", index=frame.index, dtype=object)
    return frame[column].astype(object).where(frame[column].notna(), "").astype(str)


def _num(frame: pd.DataFrame, column: str, default: float = math.nan) -> pd.Series:
    if column not in frame:
        return pd.Series(default, index=frame.index, dtype="float64")
    return pd.to_numeric(frame[column], errors="coerce").astype("float64")


def apply(report_df: pd.DataFrame, mapping: Mapping, *, machine: Machine | None = None) -> pd.DataFrame:
    """The report with ledger_op, expected_flops, min_bytes, flop_ratio, excess_traffic, ideal_time_s
    and headroom filled for every kernel a rule matches (NaN / '' for the rest)."""
    frame = report_df.copy()
    n = len(frame)
    kernel_name, nvtx_path = _text(frame, "kernel_name"), _text(frame, "nvtx_path")
    op_col, shapes_col = _text(frame, "op"), _text(frame, "input_shapes")
    launches = _num(frame, "launches", 1.0).fillna(1.0)

    # One evaluation per distinct (kernel, nvtx path, op, input shapes): reports repeat them per level and launch.
    combos = pd.DataFrame({"k": kernel_name, "n": nvtx_path, "o": op_col, "s": shapes_col})
    codes, uniques = pd.factorize(pd.MultiIndex.from_frame(combos))
    results: list[Match | None] = []
    rules: list[Rule | None] = []
    for k, nv, o, s in uniques:
        rule = mapping.first_match(k, nv, o)
        rules.append(rule)
        results.append(None if rule is None else evaluate(rule, nv, o, s))

    label = np.array([("" if r is None else r.label) for r in results], dtype=object)[codes] if n else np.array([], dtype=object)
    per_flops = np.array([math.nan if r is None else r.flops for r in results], dtype="float64")[codes] if n else np.array([])
    per_bytes = np.array([math.nan if r is None else r.bytes for r in results], dtype="float64")[codes] if n else np.array([])
    expected = per_flops * launches.to_numpy()
    min_bytes = per_bytes * launches.to_numpy()

    # Measured DRAM bytes and DRAM bandwidth come from each kernel's dram row.
    keys = kernel_key(frame)
    level = _text(frame, "level")
    dram = frame.loc[level.eq("dram")]
    dram_keys = keys.loc[dram.index]
    dram_bytes = pd.Series(_num(dram, "bytes").to_numpy(), index=dram_keys.to_numpy())
    dram_bw = pd.Series(_num(dram, "bandwidth_bytes_per_s").to_numpy(), index=dram_keys.to_numpy())
    dram_bytes = dram_bytes[~dram_bytes.index.duplicated()]
    dram_bw = dram_bw[~dram_bw.index.duplicated()]
    measured_dram = keys.map(dram_bytes).astype("float64").to_numpy()
    bandwidth = keys.map(dram_bw).astype("float64").to_numpy().copy()
    peak = _num(frame, "peak_flop_per_s").to_numpy().copy()

    # Where the report has no roof, the formula's roof on the machine (given, or matched from the device name).
    need = np.isnan(peak) | np.isnan(bandwidth)
    if need.any():
        devices = _text(frame, "device").to_numpy()
        found: dict[str, Machine | None] = {}
        for i in np.flatnonzero(need & ~np.isnan(per_flops)):
            if machine is None and devices[i] not in found:
                found[devices[i]] = _lookup(devices[i])
            m = machine if machine is not None else found[devices[i]]
            if m is None:
                continue
            result = results[codes[i]]
            if math.isnan(peak[i]) and result is not None and result.roof is not None:
                from nsroof.models.ledger.analysis import roof_ceiling

                peak[i] = roof_ceiling(m, result.roof).value
            if math.isnan(bandwidth[i]):
                bandwidth[i] = m.bandwidth_bytes_per_s.get("dram", math.nan)

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
    reasons = np.array([("" if r is None else r.reason) for r in results], dtype=object)[codes] if n else []
    if n and any(reasons):
        missing = _text(frame, "missing").to_numpy()
        why = np.array([("ledger: " + r.replace(",", ";")) if r else "" for r in reasons], dtype=object)
        joined = [", ".join(x for x in (a, b) if x) for a, b in zip(missing, why, strict=True)]
        frame["missing"] = pd.Series(joined, index=frame.index, dtype=object)
    matched, total = coverage(frame)
    warnings = _rule_warnings(frame, mapping, rules, results, codes)
    frame.attrs = dict(frame.attrs) | {"ledger": {"mapping": mapping.path, "matched": matched, "kernels": total,
                                                  "warnings": warnings}}
    return frame


def _rule_warnings(frame: pd.DataFrame, mapping: Mapping, rules: list[Rule | None], results: list[Match | None],
                   codes: np.ndarray) -> list[str]:
    """One line per rule that matched kernels it could not evaluate (first-match-wins: those kernels get no
    other rule): where the rule is, how many kernels, the first of them in report order and why."""
    failed: dict[int, list[int]] = {}  # rule index -> distinct (kernel, nvtx, op, shapes) it failed on
    for u, (rule, result) in enumerate(zip(rules, results, strict=True)):
        if rule is not None and result is not None and result.reason:
            failed.setdefault(rule.index, []).append(u)
    if not failed:
        return []
    keys = kernel_key(frame).to_numpy()
    function, kernel_name = _text(frame, "function").to_numpy(), _text(frame, "kernel_name").to_numpy()
    source, kernel_id = _text(frame, "source").to_numpy(), _text(frame, "kernel_id").to_numpy()
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


def _lookup(device: str) -> Machine | None:
    if not device:
        return None
    from nsroof.models import machines

    return machines.lookup_device(device)


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
    level = _text(report_df, "level")
    keys = kernel_key(report_df)
    # One row per kernel: its dram row when the report has one, else its first row.
    order = np.where(level.eq("dram"), 0, 1)
    one = report_df.assign(_key=keys.to_numpy(), _order=order).sort_values("_order", kind="stable")
    one = one.drop_duplicates("_key")
    kernels = pd.DataFrame({
        "name": _text(one, "kernel_name").to_numpy(),
        "ledger_op": _text(one, "ledger_op").to_numpy(),
        "nvtx_path": _text(one, "nvtx_path").to_numpy(),
        "launches": _num(one, "launches", 1.0).fillna(1.0).to_numpy(),
        "duration_s": _num(one, "duration_s").to_numpy(),
        "ideal_time_s": _num(one, "ideal_time_s").to_numpy(),
    })
    matched = kernels["ideal_time_s"].notna() & kernels["duration_s"].notna()
    kernels["gain_s"] = (kernels["duration_s"] - kernels["ideal_time_s"]).where(matched)

    rows: list[dict[str, Any]] = []
    good = kernels[matched]
    for (name, op), g in good.groupby(["name", "ledger_op"], sort=False):
        rows.append(_gain_row("kernel", str(name), str(op), g, 0))
    # Every NVTX range at every depth, with the matched kernels under it.
    ranges: dict[str, list[int]] = {}
    for i, path in enumerate(kernels["nvtx_path"]):
        parts = [s for s in str(path).split("/") if s] if path else []
        for depth in range(1, len(parts) + 1):
            ranges.setdefault("/".join(parts[:depth]), []).append(i)
    for path, idx in ranges.items():
        g = kernels.iloc[idx]
        gm = g[matched.iloc[idx].to_numpy()]
        if len(gm):
            rows.append(_gain_row("nvtx", path, "", gm, int(len(g) - len(gm))))
    table = pd.DataFrame(rows, columns=GAIN_COLUMNS)
    if len(table) == 0:
        return table
    table = table.astype({"kind": object, "name": object, "ledger_op": object, "kernels": "int64",
                          "launches": "int64", "duration_s": "float64", "ideal_time_s": "float64",
                          "gain_s": "float64", "headroom": "float64", "unmatched_kernels": "int64"})
    return table.sort_values("gain_s", ascending=False, kind="stable").reset_index(drop=True)


def _gain_row(kind: str, name: str, op: str, g: pd.DataFrame, unmatched: int) -> dict[str, Any]:
    duration = float(g["duration_s"].sum())
    ideal = float(g["ideal_time_s"].sum())
    return {
        "kind": kind, "name": name, "ledger_op": op, "kernels": int(len(g)), "launches": int(g["launches"].sum()),
        "duration_s": duration, "ideal_time_s": ideal, "gain_s": float(g["gain_s"].sum()),
        "headroom": duration / ideal if ideal > 0 else math.nan, "unmatched_kernels": unmatched,
    }
