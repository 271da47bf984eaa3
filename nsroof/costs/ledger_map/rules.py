"""The ledger mapping file of `nsroof analyze --ledger` (nsroof.roofs.ledger_join): YAML or JSON, read and
validated here; every problem is an InputError naming the file and line. The format is in
nsroof.roofs.ledger_join's docstring."""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from nsroof.errors import InputError

AUTO = "aten"  # formula name meaning: whatever the collectors map the marker's aten op to
RULE_KEYS = ("kernel", "nvtx", "op", "formula", "shape", "dtype", "name")
_SIZE_TERM = re.compile(r"^sizes\[(\d+)\]\[(-?\d+)\]$")


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
        raise InputError(p, "empty ledger mapping", line=1,
                         hint="give at least one rule (see nsroof.roofs.ledger_join)")
    if p.suffix.lower() == ".json":
        try:
            json.loads(text)
        except json.JSONDecodeError as exc:
            raise InputError(p, f"invalid JSON ({exc.msg})", line=exc.lineno,
                             hint="fix the JSON syntax") from None
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
            raise InputError(p, "no 'rules' list", line=_line(root),
                             hint="add rules: [{kernel: REGEX, formula: NAME, shape: {...}}]")
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
    from nsroof.costs.ledger import LedgerError, canonical_dtype

    try:
        return canonical_dtype(str(_plain(node)))
    except LedgerError as exc:
        raise InputError(p, str(exc), line=_line(node)) from None


def _rule(p: Path, index: int, node: Any, default_dtype: str | None) -> Rule:
    from nsroof.costs import ledger

    fields = _rule_fields(p, index, node)
    patterns = _patterns(p, index, node, fields)
    if "formula" not in fields:
        raise InputError(p, f"rule {index + 1}: no formula", line=_line(node),
                         hint=f"one of: {AUTO}, {', '.join(ledger.names())}")
    formula_node = fields["formula"][1]
    formula = str(_plain(formula_node))
    name = str(_plain(fields["name"][1])) if "name" in fields else ""
    dtype = _dtype(p, fields["dtype"][1]) if "dtype" in fields else default_dtype
    shape = _shape(p, index, fields["shape"][1]) if "shape" in fields else {}
    where = (index, _line(node), patterns.get("kernel"), patterns.get("nvtx"), patterns.get("op"))
    if formula == AUTO:
        if shape:
            raise InputError(p, f"rule {index + 1}: formula '{AUTO}' takes its shape from the op's recorded "
                             "sizes; drop 'shape' or name a formula", line=_line(fields["shape"][0]))
        if dtype is None:
            raise InputError(p, f"rule {index + 1}: formula '{AUTO}' needs a dtype (NVTX markers do not "
                             "record one)", line=_line(node),
                             hint="add dtype: fp32 (or bf16, fp16, ...) to the rule or the file")
        return Rule(where[0], where[1], formula, *where[2:], {}, dtype, name)
    try:
        spec = ledger.get(formula)
    except ledger.LedgerError as exc:
        raise InputError(p, f"rule {index + 1}: {exc}", line=_line(formula_node)) from None
    shape = _checked_shape(p, index, node, fields, formula, spec, shape, dtype)
    return Rule(where[0], where[1], spec.name, *where[2:], shape, dtype, name)


def _rule_fields(p: Path, index: int, node: Any) -> dict[str, tuple[Any, Any]]:
    """The rule's keys -> (key node, value node); an unknown key is an error."""
    import yaml

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
    return fields


def _patterns(p: Path, index: int, node: Any,
              fields: dict[str, tuple[Any, Any]]) -> dict[str, re.Pattern[str]]:
    """The rule's kernel/nvtx/op regexes, at least one."""
    patterns: dict[str, re.Pattern[str]] = {}
    for key in ("kernel", "nvtx", "op"):
        if key in fields:
            value = _plain(fields[key][1])
            if not isinstance(value, str) or not value:
                raise InputError(p, f"rule {index + 1}: {key} must be a non-empty regex string",
                                 line=_line(fields[key][1]))
            try:
                patterns[key] = re.compile(value)
            except re.error as exc:
                raise InputError(p, f"rule {index + 1}: bad {key} regex {value!r} ({exc.msg})",
                                 line=_line(fields[key][1]),
                                 hint="escape ( ) [ ] < > * + ? with \\ where meant literally") from None
    if not patterns:
        raise InputError(p, f"rule {index + 1} matches nothing: give kernel, nvtx or op", line=_line(node))
    return patterns


def _shape(p: Path, index: int, shape_node: Any) -> dict[str, Any]:
    """The rule's shape: parameter -> literal or size expression (checked to parse)."""
    import yaml

    if not isinstance(shape_node, yaml.MappingNode):
        raise InputError(p, f"rule {index + 1}: shape must be a mapping of parameter: value",
                         line=_line(shape_node))
    shape: dict[str, Any] = {}
    for k, v in shape_node.value:
        value = _plain(v)
        if isinstance(value, str) and "sizes" in value:
            try:
                parse_expression(value)
            except ValueError as exc:
                raise InputError(p, f"rule {index + 1}: {k.value}: {exc}", line=_line(v),
                                 hint="write sizes[i][j], or a product like "
                                      "sizes[0][0]*sizes[0][1]") from None
        shape[str(k.value).replace("-", "_")] = value
    return shape


def _checked_shape(p: Path, index: int, node: Any, fields: dict[str, tuple[Any, Any]], formula: str,
                   spec: Any, shape: dict[str, Any], dtype: str | None) -> dict[str, Any]:
    """The shape against the formula's parameters: known names, coercible literals, a dtype, no gap."""
    from nsroof.costs import ledger

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
                             hint="add dtype: fp32 (or bf16, fp16, ...) to the rule or at the top of the "
                                  "file")
        shape["dtype"] = dtype
    elif dtype is not None and "dtype" not in params and "dtype" in fields:
        raise InputError(p, f"rule {index + 1}: {formula} has no dtype parameter",
                         line=_line(fields["dtype"][0]),
                         hint=f"give its dtypes in shape ({', '.join(n for n in params if 'dtype' in n)})")
    missing = [prm.name for prm in spec.params if prm.required and prm.name not in shape]
    if missing:
        raise InputError(p, f"rule {index + 1}: {formula} needs {', '.join(missing)} in shape",
                         line=_line(node))
    return shape


def parse_expression(text: str) -> list[tuple[int, int] | int]:
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
