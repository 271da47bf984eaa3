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


def ntd(value: float, text: str, title: str | None = None) -> str:
    """A numeric cell that sorts by `value` (data-v; '' when not finite) and shows `text`."""
    v = repr(float(value)) if np.isfinite(value) else ""
    t = f' title="{e(title)}"' if title else ""
    return f'<td class="n" data-v="{e(v)}"{t}>{e(text)}</td>'


# The pages' style (nsroof report --html, nsroof compare --html).
PAGE_CSS = """
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;margin:0 auto;max-width:1400px;
padding:12px 24px;color:#1b1b1b}
h1{font-size:22px;margin:8px 0}h2{font-size:17px;margin:26px 0 8px;border-bottom:1px solid #ddd}
table{border-collapse:collapse;font-size:12.5px}\
th,td{padding:3px 7px;border-bottom:1px solid #eee;text-align:left;
vertical-align:top}td.n{text-align:right;font-variant-numeric:tabular-nums;white-space:nowrap}
table.summary th{background:#f5f5f5}
table.sortable thead th{position:sticky;top:0;background:#f0f0f0;cursor:pointer;user-select:none;
white-space:nowrap}table.sortable thead th[aria-sort=ascending]::after{content:" \\25B2"}\
table.sortable thead th[aria-sort=descending]::after{content:" \\25BC"}
tr.group th{background:#e8eef7;text-align:left;font-weight:600;cursor:default}
.memory{color:#1f5fa8}.compute{color:#a0522d}.unknown{color:#888}.warn{color:#d62728;font-weight:600}
.k{min-width:160px;max-width:420px;overflow-wrap:anywhere}.muted{color:#777}code{font-size:12px}
.scroll{overflow-x:auto}.controls{margin:8px 0;display:flex;gap:12px;align-items:center}
figure{margin:10px 0}figure svg{width:100%;height:auto}figcaption{color:#555;font-size:12px}
summary h2{display:inline-block;border:0}summary{cursor:pointer}
td.shape{font:11.5px ui-monospace,monospace;max-width:360px;overflow-wrap:anywhere}
td.k.muted{max-width:320px;white-space:nowrap;overflow:hidden;text-overflow:ellipsis}
figure.chart{max-width:1100px}a.pt{cursor:pointer}a.pt:hover{opacity:.6}tr.hl td{background:#fff3c4}
"""

# sortable(table, rows): a click on a header of `table` sorts, inside each of its bodies, the rows matching
# the selector `rows` (numbers by their data-v value, else by text); a second click reverses. Both pages'
# tables of class "sortable" (the report's kernel table sorts within its NVTX groups).
SORT_JS = """
function sortable(t,rows){var heads=t.tHead.rows[0].cells;
function val(row,i){var c=row.cells[i],v=c.getAttribute('data-v');if(v===null)v=c.textContent;
 var f=parseFloat(v);return isNaN(f)||!/^[-+0-9.eE]+$/.test(v)?{s:v.toLowerCase()}:{n:f};}
function cmp(a,b){if(a.n!==undefined&&b.n!==undefined)return a.n-b.n;
 if(a.n!==undefined)return -1;if(b.n!==undefined)return 1;return a.s<b.s?-1:a.s>b.s?1:0;}
Array.prototype.forEach.call(heads,function(th,i){th.addEventListener('click',function(){
 var dir=th.getAttribute('aria-sort')==='ascending'?-1:1;
 Array.prototype.forEach.call(heads,function(h){h.removeAttribute('aria-sort');});
 th.setAttribute('aria-sort',dir>0?'ascending':'descending');
 Array.prototype.forEach.call(t.tBodies,function(tb){
  var found=Array.prototype.slice.call(tb.querySelectorAll(rows));
  found.sort(function(a,b){return dir*cmp(val(a,i),val(b,i));});
  found.forEach(function(r){tb.appendChild(r);});});});});}
"""
