"""`nsroof report REPORT -o report.html`: one self-contained HTML page for a report."""

from __future__ import annotations

from pathlib import Path

import click


@click.command()
@click.argument("report", type=click.Path(path_type=Path))
@click.option("-o", "--output", type=click.Path(path_type=Path), required=True, help="HTML file to write.")
@click.option("--top", type=click.IntRange(min=0), default=10, show_default=True,
              help="Kernels labelled on the charts, longest first.")
@click.option("--title", default="nsroof report", show_default=True, help="Page title.")
def report(report: Path, output: Path, top: int, title: str) -> None:
    """Write REPORT as one HTML file: run summary (devices, ceilings and their sources, share of time per
    bound per level), roofline charts as inline SVG, and a sortable, filterable table of kernels grouped
    by NVTX path. Nothing on the page is fetched from the network."""
    from nsroof.commands.plot import load_report
    from nsroof.errors import InputError
    from nsroof.report import html

    if output.suffix.lower() not in (".html", ".htm"):
        raise InputError(output, f"an HTML report needs an .html name, not {output.suffix or 'no suffix'!r}",
                         hint="name the output report.html")
    df, metadata = load_report(report)
    html.write(df, output, metadata=metadata, title=title, top=top)
    n = int(plots_kernel_count(df))
    click.echo(f"wrote {output}: {n} kernel{'s' if n != 1 else ''}, {output.stat().st_size / 1e3:.0f} kB")


def plots_kernel_count(df: object) -> int:
    from nsroof.report.plots import kernel_key

    return int(kernel_key(df).nunique())  # type: ignore[arg-type]
