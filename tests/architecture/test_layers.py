"""The layout stays true: nsroof's modules import only downward through the layers, with no cycle (their
sizes: tests/architecture/test_sizes.py).

Layers, bottom to top (README, "Architecture"):
    base (schema, units, errors, frames, names) → counters → importers → costs → roofs → report → pipeline
    → dataset → collectors → commands
The package facade (`nsroof/__init__.py`) and `__main__` may import anything (the facade resolves its
names lazily, so importing `nsroof` loads none of them).
"""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "nsroof"

# module prefix -> layer rank; the longest matching prefix wins. The stages of an analysis, in the order the
# pipeline calls them (read -> counters -> costs -> roofs -> report), rank above the shared base; an importer
# reads the counters the formulas name, so the counter vocabulary ranks below the importers.
LAYERS: dict[str, int] = {
    "nsroof._version": 0, "nsroof.schema": 0, "nsroof.units": 0, "nsroof.errors": 0, "nsroof.atomic": 0,
    "nsroof.digest": 0, "nsroof.markdown": 0, "nsroof.frames": 0, "nsroof.names": 0,
    "nsroof.counters": 1,
    "nsroof.importers": 2,
    "nsroof.costs": 3,
    "nsroof.roofs": 4,
    "nsroof.report": 5,
    "nsroof.pipeline": 6,
    "nsroof.dataset": 7,
    "nsroof.collectors": 8,
    "nsroof.examples": 8,
    "nsroof.commands": 9, "nsroof.cli": 9, "nsroof.api": 9,
}
FACADE = {"nsroof", "nsroof.__main__"}


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imported_modules(path: Path) -> set[str]:
    """Every nsroof module `path` imports, at top level or inside functions (a lazy import is still a
    dependency), `from X import Y` counted as X.Y when Y is a module."""
    name = module_name(path)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    modules = set(all_modules())
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            submodules = {f"{target}.{a.name}" for a in node.names} & modules
            found.update(submodules)
            if len(submodules) < len(node.names):  # some names are attributes of `target` itself
                found.add(target)
    return {m for m in found if m in modules and m != name}


def all_modules() -> dict[str, Path]:
    return {module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def layer(module: str) -> int | None:
    best = max((p for p in LAYERS if module == p or module.startswith(p + ".")), key=len, default=None)
    return None if best is None else LAYERS[best]


def graph() -> dict[str, set[str]]:
    return {name: imported_modules(path) for name, path in all_modules().items()}


def test_every_module_has_a_layer() -> None:
    unplaced = [m for m in all_modules() if m not in FACADE and layer(m) is None]
    assert unplaced == [], f"place these modules in a layer (LAYERS above and the README): {unplaced}"


def upward_imports(edges: dict[str, set[str]]) -> list[str]:
    found = []
    for module, targets in edges.items():
        if module in FACADE:
            continue
        for target in targets:
            if target in FACADE:
                found.append(f"{module} imports the facade {target}")
            elif (layer(target) or 0) > (layer(module) or 0):
                found.append(f"{module} (layer {layer(module)}) imports {target} (layer {layer(target)})")
    return sorted(found)


def cycles(edges: dict[str, set[str]]) -> list[str]:
    """One cycle per back edge found by a depth-first walk, as 'a -> b -> a'."""
    state: dict[str, int] = {}
    found: list[str] = []

    def visit(node: str, stack: list[str]) -> None:
        state[node] = 1
        for nxt in sorted(edges.get(node, ())):
            if nxt in FACADE:
                continue
            if state.get(nxt) == 1:
                found.append(" -> ".join(stack[stack.index(nxt):] + [nxt]))
            elif nxt not in state:
                visit(nxt, [*stack, nxt])
        state[node] = 2

    for start in sorted(edges):
        if start not in state and start not in FACADE:
            visit(start, [start])
    return found


def test_imports_only_go_down_the_layers() -> None:
    assert "\n".join(upward_imports(graph())) == ""


# Stages that must not reach a lower one straight: the report reads what the roofs classified and the names
# every stage shares (nsroof.names), never a file format.
FORBIDDEN: dict[str, tuple[str, ...]] = {"nsroof.report": ("nsroof.importers",)}


def forbidden_imports(edges: dict[str, set[str]]) -> list[str]:
    found = []
    for module, targets in edges.items():
        for stage, banned in FORBIDDEN.items():
            if module == stage or module.startswith(stage + "."):
                found += [f"{module} imports {t}" for t in targets
                          if any(t == b or t.startswith(b + ".") for b in banned)]
    return sorted(found)


def test_the_report_never_imports_an_importer() -> None:
    assert "\n".join(forbidden_imports(graph())) == ""
    # the check sees one when there is one
    assert forbidden_imports({"nsroof.report.x": {"nsroof.importers.ncu.rep"}}) == [
        "nsroof.report.x imports nsroof.importers.ncu.rep"]


def test_the_import_graph_has_no_cycle() -> None:
    assert "\n".join(cycles(graph())) == ""


def test_the_checks_see_a_violation() -> None:
    """The walkers find an upward import and a cycle when there is one (guards the tests above)."""
    fake = {"nsroof.costs.a": {"nsroof.report.b"}, "nsroof.report.b": {"nsroof.costs.a"},
            "nsroof.importers.c": {"nsroof"}}
    assert upward_imports(fake) == ["nsroof.costs.a (layer 3) imports nsroof.report.b (layer 5)",
                                    "nsroof.importers.c imports the facade nsroof"]
    assert cycles(fake) == ["nsroof.costs.a -> nsroof.report.b -> nsroof.costs.a"]
