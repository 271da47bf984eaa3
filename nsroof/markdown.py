"""The one renderer of Markdown tables: docs/readme/report.md's column table (nsroof.schema),
docs/readme/formulas.md (nsroof.counters.metric_formulas), docs/readme/machines.md (nsroof.roofs.machines)
and the GPU-check entry of docs/measurements.md (scripts/gpu_check_report.py).

GitHub's table syntax: a header row, a `|---|` separator, one row per item, cells as given (inline
Markdown allowed). A `|` inside a cell would end it, so it is escaped as `\\|`, which GitHub shows as `|`.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence


def _row(cells: Sequence[object]) -> str:
    return "| " + " | ".join(str(c).replace("|", "\\|") for c in cells) + " |"


def table(header: Sequence[str], rows: Iterable[Sequence[object]]) -> list[str]:
    """The table's lines: table(["a", "b"], [[1, "x|y"]]) == ["| a | b |", "|---|---|", "| 1 | x\\|y |"]."""
    return [_row(header), "|" + "---|" * len(header), *(_row(r) for r in rows)]
