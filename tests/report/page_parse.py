"""Read back what a report page shows, with the standard library's HTML parser (tests only)."""

from __future__ import annotations

from html.parser import HTMLParser


class Page(HTMLParser):
    """Collects the kernel table (header texts, rows with their attributes and cell texts), the NVTX group
    headers, every element id, and the <svg>/<path>/<script>/<link>/<img> elements."""

    def __init__(self, text: str) -> None:
        super().__init__(convert_charrefs=True)
        self.headers: list[str] = []
        self.rows: list[dict[str, object]] = []
        self.groups: list[str] = []
        self.ids: list[str] = []
        self.tags: dict[str, int] = {}
        self.scripts: list[dict[str, str | None]] = []
        self.urls: list[str] = []
        self._in_kernels = False
        self._cell: list[str] | None = None
        self._row: dict[str, object] | None = None
        self._group: list[str] | None = None
        self._th: list[str] | None = None
        self.feed(text)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        self.tags[tag] = self.tags.get(tag, 0) + 1
        if a.get("id"):
            self.ids.append(str(a["id"]))
        for name in ("src", "href", "xlink:href", "action", "data"):
            if a.get(name):
                self.urls.append(str(a[name]))
        if tag == "script":
            self.scripts.append(a)
        if tag == "table" and a.get("id") == "kernels":
            self._in_kernels = True
        if not self._in_kernels:
            return
        cls = a.get("class") or ""
        if tag == "tr" and cls == "kernel":
            self._row = {"attrs": a, "cells": [], "titles": []}
        elif tag == "tr" and cls == "group":
            self._group = []
        elif tag == "td" and self._row is not None:
            self._cell = []
            self._row["titles"].append(a.get("title") or "")  # type: ignore[attr-defined]
        elif tag == "th" and self._group is None and self._row is None:
            self._th = []

    def handle_endtag(self, tag: str) -> None:
        if tag == "table" and self._in_kernels:
            self._in_kernels = False
        if tag == "td" and self._cell is not None and self._row is not None:
            self._row["cells"].append("".join(self._cell))  # type: ignore[attr-defined]
            self._cell = None
        elif tag == "tr" and self._row is not None:
            self.rows.append(self._row)
            self._row = None
        elif tag == "tr" and self._group is not None:
            self.groups.append("".join(self._group))
            self._group = None
        elif tag == "th" and self._th is not None:
            self.headers.append("".join(self._th))
            self._th = None

    def handle_data(self, data: str) -> None:
        for buf in (self._cell, self._group, self._th):
            if buf is not None:
                buf.append(data)

    def column(self, header: str) -> list[str]:
        i = self.headers.index(header)
        return [r["cells"][i] for r in self.rows]  # type: ignore[index]
