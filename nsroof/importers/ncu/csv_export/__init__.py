"""Nsight Compute CSV exports -> the normalized kernel table and its file facts (nsroof.schema).

    kernels, facts = read("run.csv")   # details page (any of the three header layouts) or raw page

One row per kernel launch: identity columns from the export, every metric under its ncu name in SI
base units (float64), string metrics as strings.

How (Nsight Compute CLI docs: --csv, --page details|raw, --print-units). The details page has two readers,
each giving the identical table (tests/importers/ncu/csv_export/test_ncu_csv_readers.py), chosen by
`read(path, reader=...)`:
  - the prefix scan (scan.py), plain files only: its compiled twin (nsroof/importers/_rowscan.c, built
    when a C compiler is there at install time), or its pure-Python twin where it was not built;
  - the robust reader (robust.py) for everything the scan declines (gzip, text lines among the rows,
    rows broken by an unescaped quote in an NVTX name ...), with its row-level repairs and
    line-numbered errors.
Then, for the whole file at once (values.py): the number style is decided from all value cells, units
are converted per distinct (metric, unit) pair, values are scattered into a kernels x metrics array.
The raw page (one row per launch, raw.py) goes through the robust reader's blocks. No per-cell Python.
"""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pandas as pd

from nsroof.counters import dimensions
from nsroof.counters.metric_formulas import lacking_roofline_counters
from nsroof.errors import InputError
from nsroof.importers.kernel_table import assemble, fill_launch_identity
from nsroof.importers.ncu import csv_bytes as text
from nsroof.importers.ncu import locale_numbers as numbers
from nsroof.importers.ncu.csv_export import scan
from nsroof.importers.ncu.csv_export.layout import Collected, Layout, find_layout, identity_frame, positions
from nsroof.importers.ncu.csv_export.raw import read_raw
from nsroof.importers.ncu.csv_export.robust import details_robust
from nsroof.importers.ncu.csv_export.values import parse_values, pivot_details
from nsroof.schema import FileFacts

FORMAT_DETAILS = "ncu-csv:details"
FORMAT_RAW = "ncu-csv:raw"
RAW_EXPORT_COMMAND = "ncu -i REPORT.ncu-rep --csv --page raw --print-units base"

# read(path, reader=...): which details-page reader reads the file (the raw page has one reader)
READERS = {
    "auto": "the scan (compiled where built, else Python), the robust reader for what it declines",
    "scan": "ncu_csv compiled scan",
    "python": "ncu_csv Python scan",
    "robust": "ncu_csv robust reader",
}


class ReaderDeclined(InputError):
    """read(path, reader="scan" or "python") on a file that reader does not vouch for."""


def read(path: str | os.PathLike[str], reader: str = "auto") -> tuple[pd.DataFrame, FileFacts]:
    """Read an ncu CSV export (details or raw page) into the normalized kernel table and its file facts.

    reader: "auto" (the scan, the robust reader for what it declines), or one details-page reader alone
    ("scan": the compiled scan, "python": its pure-Python twin, "robust"); a reader alone that declines
    the file raises ReaderDeclined. facts.reader names the one that read it."""
    if reader not in READERS:
        raise ValueError(f"reader must be one of {sorted(READERS)}, not {reader!r}")
    export = text.open_export(path)
    try:
        export.check_complete()
        layout = find_layout(export)
        if layout.page == "details":
            return _read_details(export, layout, reader)
        frame, units, style, collected = read_raw(export, layout)
        return frame, _finish(export, layout, frame, units, style, collected, FORMAT_RAW, "robust")
    finally:
        export.close()


def _read_details(export: text.Export, layout: Layout, reader: str) -> tuple[pd.DataFrame, FileFacts]:
    collected = Collected()
    fast = None
    used = "robust"
    if reader != "robust":
        compiled = reader == "scan" or (reader == "auto" and scan.compiled_available())
        used = "scan" if compiled else "python"
        fast = scan.details_scan(export, layout, compiled=compiled)
        if fast is None and reader != "auto":
            raise ReaderDeclined(export.path, f"the {READERS[used]} does not read this file",
                                 hint="read it with reader='auto' "
                                      "(the robust reader takes what the scan declines)")
    if fast is not None:
        uids, ident_table, rows = fast
    else:
        used = "robust"
        uids, ident_table, rows = details_robust(export, layout, collected)
    columns: dict[str, Any] = {}
    units: dict[str, str] = {}
    style = numbers.StyleDecision("C", "no numbers")
    # the value cells are parsed on a worker thread (Arrow compute, mostly without the GIL) while the
    # identity table is built here (Python)
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="nsroof-numbers") as pool:
        parsing = pool.submit(parse_values, export, rows) if len(rows.kernel_ids) else None
        identity = identity_frame(export, layout, uids, ident_table)
        kernel_ids = identity["kernel_id"].to_numpy()
        if parsing is not None:
            kidx = positions(kernel_ids, rows.kernel_ids)
            columns, units, style = pivot_details(export, rows, kidx, len(kernel_ids), parsing,
                                                  collected.ignored, collected.notes)
    frame = assemble(identity, columns)
    fill_launch_identity(frame)
    return frame, _finish(export, layout, frame, units, style, collected, FORMAT_DETAILS, used)


def _finish(
    export: text.Export,
    layout: Layout,
    frame: pd.DataFrame,
    units: dict[str, str],
    style: numbers.StyleDecision,
    collected: Collected,
    fmt: str,
    reader: str,
) -> FileFacts:
    warnings: list[str] = []
    hints: list[str] = []
    for msg in export.preamble.messages("==ERROR==")[:3] + export.preamble.messages("==WARNING==")[:3]:
        warnings.append(f"ncu said before the results: {msg}")
    if collected.bad_rows:
        line, _ = collected.bad_rows[0]
        warnings.append(
            f"{len(collected.bad_rows)} row(s) had an unescaped quote in an NVTX range name "
            f"(first at line {line}); recovered them — keep '\"' out of NVTX range names"
        )
    if collected.text_lines:
        line, first = collected.text_lines[0]
        warnings.append(f"skipped {len(collected.text_lines)} non-CSV line(s) among the rows "
                        f"(first at line {line}: {first[:80]!r})")
    ignored = dimensions.ignored_warning(collected.ignored)
    if ignored is not None:
        warnings.append(ignored)
    warnings += collected.notes
    if style.evidence.startswith("ambiguous"):
        warnings.append(f"number style {style.style}: {style.evidence}")
    _roofline_hints(layout, frame, hints)
    return FileFacts(format=fmt, source=export.path.name, layout=layout.name, metric_units=units,
                     number_style=style.style, number_style_evidence=style.evidence, warnings=warnings,
                     hints=hints, reader=f"nsroof {READERS[reader]}")


def _roofline_hints(layout: Layout, frame: pd.DataFrame, hints: list[str]) -> None:
    missing = lacking_roofline_counters(frame.columns)
    if not missing:
        return
    lacking = " and ".join(missing)
    if layout.page == "details":
        hints.append(
            f"this details-page export holds no {lacking} counters; the raw page of the same report lists "
            f"every metric ncu collected: `{RAW_EXPORT_COMMAND}` (if it lacks them too, profile with "
            "`ncu --set roofline` or `--metrics` with the roofline counters)"
        )
    else:
        hints.append(
            f"this export holds no {lacking} counters; profile with `ncu --set roofline` "
            "(or `--metrics` with the roofline counters), then "
            f"`{RAW_EXPORT_COMMAND}`"
        )
