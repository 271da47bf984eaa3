"""`nsroof plot REPORT -o chart.png|chart.svg`: the hierarchical roofline of every kernel in a report."""

from __future__ import annotations

from pathlib import Path

import click

from nsroof.commands.options import level_option, output_option, top_option
from nsroof.schema import LEVELS, PRECISIONS


@click.command()
@click.argument("report", type=click.Path(path_type=Path))
@output_option("the chart: .png, .svg or .pdf (from the suffix)", required=True)
@level_option(["all", *LEVELS], default="all",
              what="One memory level, or all of them joined per kernel (the hierarchical view).")
@top_option("kernels labelled on the chart")
@click.option("--nvtx", metavar="REGEX", help="Only kernels whose NVTX path matches this regular expression.")
@click.option("--precision", type=click.Choice(list(PRECISIONS)), help="Only kernels whose FLOPs are mostly of this precision.")
def plot(report: Path, output: Path, level: str, top: int, nvtx: str | None, precision: str | None) -> None:
    """Draw the roofline of every kernel in REPORT: compute and bandwidth roofs with their sources,
    one point per kernel and level, point area proportional to the kernel's share of time."""
    from nsroof.errors import InputError
    from nsroof.report import plots
    from nsroof.report.load import load_report

    if output.suffix.lower().lstrip(".") not in plots.FORMATS:
        raise InputError(output, f"cannot write a chart as {output.suffix or 'a file without suffix'!r}",
                         hint="name the output .png, .svg or .pdf")
    df, _ = load_report(report)
    fig = plots.plot(df, level=level, top=top, nvtx=nvtx, precision=precision)
    plots.save(fig, output)
    data = plots.chart_data(df, level=level, top=top, nvtx=nvtx, precision=precision)
    missing = plots.unplotted(data)
    n = data["key"].nunique()
    points = int(data["plotted"].sum())
    text = f"wrote {output}: {n} kernel{'s' if n != 1 else ''}, {points} point{'s' if points != 1 else ''}"
    if n == 0:
        text += " (no kernel matches the filters)"
    whole = int((~missing["partial"]).sum()) if len(missing) else 0
    if whole:
        text += f"; {whole} kernel{'s' if whole != 1 else ''} not plotted (listed under the chart)"
    click.echo(text)
