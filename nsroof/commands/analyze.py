"""`nsroof analyze EXPORT…`: the main job."""

from __future__ import annotations

from pathlib import Path

import click


@click.command()
@click.argument("inputs", nargs=-1, required=True, type=click.Path(path_type=Path))
@click.option("-o", "--output", type=click.Path(path_type=Path), help="Report file (default: next to the input).")
@click.option("--machine", help="Machine ceilings: a name from `nsroof machines` or a JSON profile (e.g. from `nsroof measure`).")
@click.option("--aggregate", is_flag=True, help="Merge repeated launches of the same kernel under the same NVTX path.")
@click.option("--ledger", "ledger", type=click.Path(path_type=Path), help="YAML/JSON map of kernel patterns to ledger formulas.")
@click.option("--top", default=10, show_default=True, help="Kernels listed in the summary.")
def analyze(inputs: tuple[Path, ...], output: Path | None, machine: str | None, aggregate: bool,
            ledger: Path | None, top: int) -> None:
    """Classify every kernel of Nsight Compute exports (CSV of any version/locale, .ncu-rep) or
    torch.profiler traces at DRAM, L2 and L1, and write a Parquet report."""
    from nsroof.pipeline import analyze as run, default_output
    from nsroof.report.summary import render

    report = run(list(inputs), machine=machine, aggregate=aggregate, ledger=ledger)
    out = output or default_output(inputs[0])
    report.write(out)
    click.echo(render(report, top=top, output=str(out)))
