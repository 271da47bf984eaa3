"""`nsroof plot REPORT -o chart.png|chart.svg`: the hierarchical roofline of every kernel in a report."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from nsroof.schema import LEVELS, PRECISIONS

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd


def load_report(path: Path) -> tuple[pd.DataFrame, dict[str, Any]]:
    """Read a report file or dataset directory written by `nsroof analyze`, with its metadata;
    anything else is an InputError naming the file and the fix."""
    import pyarrow as pa

    from nsroof.errors import InputError
    from nsroof.report import parquet
    from nsroof.report.plots import check_columns

    hint = "give a report written by `nsroof analyze EXPORT -o report.parquet`"
    if not path.exists():
        raise InputError(path, "no such file or directory", hint=hint)
    try:
        df = parquet.load(path)
        metadata = parquet.read_metadata(path)
    except (pa.ArrowException, OSError, ValueError) as exc:
        cause = " ".join(str(exc).split())[:200] or type(exc).__name__
        raise InputError(path, f"not a readable Parquet report ({cause})", hint=hint) from None
    lacking = check_columns(df)
    if lacking:
        raise InputError(path, f"not an nsroof report: lacks the columns {', '.join(lacking)}", hint=hint)
    return df, metadata


@click.command()
@click.argument("report", type=click.Path(path_type=Path))
@click.option("-o", "--output", type=click.Path(path_type=Path), required=True,
              help="Chart file: .png, .svg or .pdf (from the suffix).")
@click.option("--level", type=click.Choice(["all", *LEVELS]), default="all", show_default=True,
              help="One memory level, or all of them joined per kernel (the hierarchical view).")
@click.option("--top", type=click.IntRange(min=0), default=10, show_default=True,
              help="Label this many kernels, longest first.")
@click.option("--nvtx", metavar="REGEX", help="Only kernels whose NVTX path matches this regular expression.")
@click.option("--precision", type=click.Choice(list(PRECISIONS)), help="Only kernels whose FLOPs are mostly of this precision.")
def plot(report: Path, output: Path, level: str, top: int, nvtx: str | None, precision: str | None) -> None:
    """Draw the roofline of every kernel in REPORT: compute and bandwidth roofs with their sources,
    one point per kernel and level, point area proportional to the kernel's share of time."""
    from nsroof.errors import InputError
    from nsroof.report import plots

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
