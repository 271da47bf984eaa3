"""No function in nsroof/ over 80 lines, no module over 600: a reader holds one in mind.

ALLOWED is empty: every module and function is within the limits. An entry (an offender in a file someone is
splitting, its size when listed, which may only shrink, and who owns it) is a design question, not a fix."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "nsroof"
MAX_FUNCTION_LINES = 80
MAX_MODULE_LINES = 600

# "path relative to nsroof/" or "path::function" -> (lines when listed, owner)
ALLOWED: dict[str, tuple[int, str]] = {}


def sizes(root: Path = PACKAGE) -> dict[str, int]:
    """Every module's line count and every function's (def line to its last line, docstring included),
    keyed as in ALLOWED; a method is 'path::Class.method', a nested function 'path::outer.inner'."""
    out: dict[str, int] = {}
    for path in sorted(root.rglob("*.py")):
        rel = path.relative_to(root).as_posix()
        text = path.read_text(encoding="utf-8")
        out[rel] = text.count("\n")
        todo: list[tuple[ast.AST, str]] = [(ast.parse(text), "")]
        while todo:
            node, prefix = todo.pop()
            for child in ast.iter_child_nodes(node):
                name = prefix
                if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                    name = f"{prefix}.{child.name}" if prefix else child.name
                    if not isinstance(child, ast.ClassDef):
                        out[f"{rel}::{name}"] = (child.end_lineno or child.lineno) - child.lineno + 1
                todo.append((child, name))
    return out


def too_long(found: dict[str, int]) -> list[str]:
    out = []
    for key, lines in sorted(found.items()):
        limit = MAX_FUNCTION_LINES if "::" in key else MAX_MODULE_LINES
        allowed = ALLOWED.get(key, (limit, ""))[0]
        if lines > max(limit, allowed):
            kind = "function" if "::" in key else "module"
            out.append(f"{key}: {lines} lines (a {kind} holds at most {limit}"
                       + (f"; listed at {allowed}, it may only shrink)" if key in ALLOWED else "): split it"))
    return out


def test_no_function_over_80_lines_and_no_module_over_600() -> None:
    assert "\n".join(too_long(sizes())) == ""


def test_the_allow_list_holds_only_real_offenders() -> None:
    """An entry whose file or function is back under the limit (or gone) is taken off the list."""
    found = sizes()
    limits = {k: MAX_FUNCTION_LINES if "::" in k else MAX_MODULE_LINES for k in ALLOWED}
    stale = [k for k in ALLOWED if found.get(k, 0) <= limits[k]]
    assert stale == [], f"no longer over the limit: drop them from ALLOWED: {stale}"


def test_the_check_sees_a_long_function_and_a_long_module(tmp_path: Path) -> None:
    body = "\n".join(f"    x{i} = {i}" for i in range(MAX_FUNCTION_LINES))
    (tmp_path / "long.py").write_text(f"def f() -> None:\n{body}\n" + "\n" * MAX_MODULE_LINES)
    found = sizes(tmp_path)
    assert found["long.py::f"] == MAX_FUNCTION_LINES + 1
    assert [line.split(":")[0] for line in too_long(found)] == ["long.py", "long.py"]


def test_allowed_entries_name_an_owner() -> None:
    assert [key for key, (_, owner) in ALLOWED.items() if not owner] == []
