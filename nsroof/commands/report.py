"""`nsroof report REPORT -o report.html`: one self-contained HTML page for a report."""

from __future__ import annotations

from pathlib import Path

import click

from nsroof.commands.options import output_option, top_option


@click.command()
@click.argument("report", type=click.Path(path_type=Path))
@output_option("the HTML page (.html)", required=True)
@top_option("kernels labelled on the charts")
@click.option("--title", default="nsroof report", show_default=True, help="Page title.")
def report(report: Path, output: Path, top: int, title: str) -> None:
    """Write REPORT as one HTML file: run summary (devices, ceilings and their sources, share of time per
    bound per level), roofline charts as inline SVG, and a sortable, filterable table of kernels grouped
    by NVTX path. Nothing on the page is fetched from the network."""
    from nsroof.errors import InputError
    from nsroof.report import html
    from nsroof.report.load import load_report
    from nsroof.schema import kernel_key

    if output.suffix.lower() not in (".html", ".htm"):
        raise InputError(output, f"an HTML report needs an .html name, not {output.suffix or 'no suffix'!r}",
                         hint="name the output report.html")
    df, metadata = load_report(report)
    html.write(df, output, metadata=metadata, title=title, top=top)
    n = int(kernel_key(df).nunique())
    click.echo(f"wrote {output}: {n} kernel{'s' if n != 1 else ''}, {output.stat().st_size / 1e3:.0f} kB")
