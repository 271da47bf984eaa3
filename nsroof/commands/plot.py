"""`nsroof plot REPORT -o chart.png|chart.svg`: the hierarchical roofline of every kernel in a report."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from nsroof.commands.options import (
    check_suffix,
    level_option,
    output_option,
    quiet_option,
    selection_options,
    top_option,
)
from nsroof.schema import LEVELS, PRECISIONS


def _size(ctx: click.Context, param: click.Parameter, value: str | None) -> tuple[float, float] | None:
    """--size WxH in inches ('8x5'): the plot area, the legend and listing added around it."""
    if value is None:
        return None
    try:
        w, h = (float(v) for v in value.lower().split("x"))
    except ValueError:
        raise click.BadParameter(f"{value!r}: give width x height in inches, e.g. 8x5") from None
    if not (1 <= w <= 60 and 1 <= h <= 60):
        raise click.BadParameter(f"{value!r}: width and height must be between 1 and 60 inches")
    return w, h


@click.command()
@click.argument("report", type=click.Path(path_type=Path))
@output_option("the chart: .png, .svg or .pdf (from the suffix)", required=True)
@level_option(["all", *LEVELS], default="all",
              what="One memory level, or all of them joined per kernel (the hierarchical view).")
@top_option("kernels labelled on the chart")
@click.option("--precision", type=click.Choice(list(PRECISIONS)),
              help="Only kernels whose FLOPs are mostly of this precision.")
@click.option("--title", help="Chart title (default: what is shown, on which devices).")
@click.option("--size", callback=_size, metavar="WxH",
              help="Plot area in inches, e.g. 8x5 (default 6.6x5.4).")
@click.option("--dpi", type=click.IntRange(30, 1200), default=None, metavar="N",
              help="PNG resolution (default 110).")
@selection_options()
@quiet_option()
def plot(report: Path, output: Path, level: str, top: int, precision: str | None, title: str | None,
         size: tuple[float, float] | None, dpi: int | None, selection: Any, quiet: bool) -> None:
    """Draw the roofline of every kernel in REPORT: compute and bandwidth roofs with their sources,
    one point per kernel and level (a marker shape per level), point area proportional to the kernel's
    share of time. A report of several devices gets one panel per device."""
    from nsroof.errors import NsroofError
    from nsroof.report import chart_data, plots
    from nsroof.report.load import load_report

    check_suffix(output, tuple(f".{f}" for f in plots.FORMATS), "a chart")
    df, _ = load_report(report)
    df = selection.apply(df, what=str(report))
    data = chart_data.chart_data(df, level=level, top=top, precision=precision)
    n = data["key"].nunique()
    if n == 0 and not df.empty:
        raise NsroofError(f"no kernel of {report} has FLOPs mostly of {precision} at {level}: nothing to draw"
                          if precision else f"no kernel of {report} has a row at {level}: nothing to draw")
    fig = plots.plot(df, level=level, top=top, precision=precision, title=title, size=size)
    plots.save(fig, output, dpi=dpi)
    missing = chart_data.unplotted(data)
    points = int(data["plotted"].sum())
    noun = chart_data.row_noun(df)
    text = f"wrote {output}: {n} {noun}{'s' if n != 1 else ''}, {points} point{'s' if points != 1 else ''}"
    if df.empty:
        text += " (the report has no kernels)"
    whole = int((~missing["partial"]).sum()) if len(missing) else 0
    if whole:
        text += f"; {whole} {noun}{'s' if whole != 1 else ''} not plotted (listed under the chart)"
    if not quiet:
        click.echo(text)
