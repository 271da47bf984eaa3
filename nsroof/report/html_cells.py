"""The HTML page's cells and tables (nsroof.report.html and html_overview), every string escaped."""

from __future__ import annotations

import html
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np


def e(value: Any) -> str:
    return html.escape("" if value is None else str(value), quote=True)


def table(headers: Sequence[str], rows: Iterable[Sequence[str]], cls: str = "summary") -> str:
    head = "".join(f"<th>{h}</th>" for h in headers)
    body = "".join("<tr>" + "".join(rows_cell for rows_cell in r) + "</tr>" for r in rows)
    return f'<table class="{cls}"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>'


def td(text: str, *, numeric: bool = False, title: str | None = None, cls: str = "") -> str:
    classes = " ".join(c for c in ("n" if numeric else "", cls) if c)
    attrs = (f' class="{classes}"' if classes else "") + (f' title="{e(title)}"' if title else "")
    return f"<td{attrs}>{e(text)}</td>"


def pct(share: float) -> str:
    return "—" if not np.isfinite(share) else f"{share * 100:.1f}%"
