"""`nsroof report REPORT -o report.html`: one self-contained HTML page for a report."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from nsroof.commands.options import check_suffix, output_option, quiet_option, selection_options, top_option


@click.command()
@click.argument("report", type=click.Path(path_type=Path))
@output_option("the HTML page (.html)", required=True)
@top_option("kernels labelled on the charts")
@click.option("--title", default="nsroof report", show_default=True, help="Page title.")
@click.option("--rows", type=click.IntRange(min=0), default=None,
              help="Kernels listed in the page's table, longest first (default 200; 0: every kernel); the "
                   "charts show them all.")
@selection_options()
@quiet_option()
def report(report: Path, output: Path, top: int, title: str, rows: int | None, selection: Any,
           quiet: bool) -> None:
    """Write REPORT as one HTML file: an overview first (time by category, per step, prefill vs decode, the
    top ops and modules with bound and headroom), run summary (devices, ceilings and their sources, share of
    time per bound per level), roofline charts as inline SVG, the ops and modules by time, and, folded, a
    sortable, filterable table of kernels grouped by NVTX path; hover a point for its kernel, and the table's
    filter filters the charts too. Nothing on the page is fetched from the network."""
    from nsroof.report import html
    from nsroof.report.load import load_report
    from nsroof.schema import kernel_key
    from nsroof.units import human_bytes

    check_suffix(output, (".html", ".htm"), "an HTML report")
    df, metadata = load_report(report)
    df = selection.apply(df, what=str(report))
    if selection:
        metadata = {**metadata, "selection": selection.describe()}
    rows = html.MAX_TABLE_ROWS if rows is None else rows
    html.write(df, output, metadata=metadata, title=title, top=top, max_rows=rows)
    n = int(kernel_key(df).nunique())
    if not quiet:
        listed = f" (the {rows:,} longest in its table)" if 0 < rows < n else ""
        size = human_bytes(output.stat().st_size)
        click.echo(f"wrote {output}: {n} kernel{'s' if n != 1 else ''}{listed}, {size}")
