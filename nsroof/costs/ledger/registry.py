"""The formula registry: each formula registered once under one name, looked up by name.

A formula is a plain function of keyword shape parameters (and `dtype`) returning an Operator.
Its signature is the single source of truth for what it accepts: the CLI's shape options, the
join's mapping files and `cost()` all go through `Formula.bind`.
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from nsroof.costs.ledger.core import LedgerError, Operator

FormulaFn = Callable[..., Operator]


@dataclass(frozen=True)
class Param:
    name: str
    type: type  # int, float, bool or str
    default: Any  # inspect.Parameter.empty when required

    @property
    def required(self) -> bool:
        return self.default is inspect.Parameter.empty

    def coerce(self, value: Any, formula: str) -> Any:
        """Turn a CLI/YAML value into this parameter's type; refuse anything lossy."""
        try:
            if self.type is bool:
                if isinstance(value, bool):
                    return value
                text = str(value).strip().lower()
                if text in ("1", "true", "yes", "on"):
                    return True
                if text in ("0", "false", "no", "off"):
                    return False
                raise ValueError(value)
            if self.type is int:
                if isinstance(value, bool):
                    raise ValueError(value)
                if isinstance(value, int):
                    return value
                number = float(str(value).replace("_", "")) if isinstance(value, str) else float(value)
                if not math.isfinite(number) or not number.is_integer():
                    raise ValueError(value)
                return int(number)
            if self.type is float:
                if isinstance(value, bool):
                    raise ValueError(value)
                number = float(str(value).replace("_", "")) if isinstance(value, str) else float(value)
                if not math.isfinite(number):
                    raise ValueError(value)
                return number
            return str(value)
        except (TypeError, ValueError):
            raise LedgerError(
                f"{formula}: {self.name} must be {self.type.__name__}, got {value!r}"
            ) from None


@dataclass(frozen=True)
class Formula:
    name: str
    fn: FormulaFn
    params: tuple[Param, ...]
    summary: str  # first docstring line
    source: str  # where the formula comes from

    def bind(self, shape: Mapping[str, Any]) -> dict[str, Any]:
        """Validate and coerce `shape` against the signature (names with '-' accepted as '_')."""
        by_name = {p.name: p for p in self.params}
        out: dict[str, Any] = {}
        for raw_key, value in shape.items():
            key = str(raw_key).replace("-", "_")
            if key not in by_name:
                raise LedgerError(
                    f"{self.name}: unknown parameter {raw_key!r}; accepted: "
                    + ", ".join(p.name for p in self.params)
                )
            out[key] = by_name[key].coerce(value, self.name)
        missing = [p.name for p in self.params if p.required and p.name not in out]
        if missing:
            raise LedgerError(f"{self.name}: missing parameter(s) {', '.join(missing)}")
        return out

    def __call__(self, **shape: Any) -> Operator:
        return self.fn(**self.bind(shape))

    def signature_text(self) -> str:
        parts = []
        for p in self.params:
            if p.required:
                parts.append(f"--{p.name.replace('_', '-')} {p.type.__name__.upper()}")
            elif p.type is bool:
                parts.append(f"[--{'no-' if p.default else ''}{p.name.replace('_', '-')}]")
            else:
                parts.append(f"[--{p.name.replace('_', '-')} {p.default}]")
        return " ".join(parts)


_REGISTRY: dict[str, Formula] = {}
_TYPES: dict[Any, type] = {int: int, float: float, bool: bool, str: str,
                           "int": int, "float": float, "bool": bool, "str": str}


def register(name: str, *, source: str) -> Callable[[FormulaFn], FormulaFn]:
    """Decorator: register `fn` under `name`. A second registration of a name is an error, and
    every parameter must be keyword-able with an int/float/bool/str annotation."""

    def decorate(fn: FormulaFn) -> FormulaFn:
        if not isinstance(name, str) or not name:
            raise LedgerError(f"formula name must be a non-empty string, got {name!r}")
        if name in _REGISTRY:
            raise LedgerError(f"formula {name!r} is already registered ({_REGISTRY[name].fn.__module__})")
        params: list[Param] = []
        for p in inspect.signature(fn).parameters.values():
            if p.kind not in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY):
                raise LedgerError(f"formula {name!r}: parameter {p.name!r} must be a plain keyword parameter")
            ptype = _TYPES.get(p.annotation)
            if ptype is None:
                raise LedgerError(f"formula {name!r}: parameter {p.name!r} needs an int/float/bool/str "
                                  "annotation")
            params.append(Param(p.name, ptype, p.default))
        doc = inspect.getdoc(fn) or ""
        _REGISTRY[name] = Formula(name, fn, tuple(params), doc.splitlines()[0] if doc else "", source)
        return fn

    return decorate


def unregister(name: str) -> None:
    """For tests that register throw-away formulas."""
    _REGISTRY.pop(name, None)


def get(name: str) -> Formula:
    key = str(name).strip().lower().replace("_", "-")
    formula = _REGISTRY.get(key) or _REGISTRY.get(str(name))
    if formula is None:
        raise LedgerError(f"unknown ledger formula {name!r}; known: {', '.join(names())}")
    return formula


def names() -> list[str]:
    return sorted(_REGISTRY)


def formulas() -> list[Formula]:
    return [_REGISTRY[n] for n in names()]


def operator(name: str, **shape: Any) -> Operator:
    """ledger.operator("gemm", m=64, n=256, k=128, dtype="fp32") -> Operator."""
    return get(name)(**shape)
