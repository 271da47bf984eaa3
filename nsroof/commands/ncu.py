"""`nsroof ncu [--range NAME] [--set roofline|minimal] [-o report] -- python train.py …`"""

from __future__ import annotations

from pathlib import Path

import click

from nsroof.commands.options import machine_option, output_option, top_option


@click.command(context_settings={"ignore_unknown_options": True, "allow_interspersed_args": False})
@click.option("--range", "range_name", help="Profile only kernels inside this nsroof range (the script opens it "
                                             "with nsroof.annotate(NAME)); default: the whole script.")
@click.option("--set", "metric_set", type=click.Choice(["roofline", "minimal"]), default="roofline", show_default=True,
              help="roofline: FLOPs of every precision, DRAM/L2/L1 bytes and the ceilings' counters; minimal: time, "
                   "FP32/FP64 FLOPs and DRAM bytes (fewer replay passes).")
@machine_option(when_omitted="the local GPU's datasheet entry")
@output_option("BASE.ncu-rep, BASE.log, BASE.csv and the report BASE.parquet (-o is the base name)",
               default=Path("nsroof-ncu"))
@top_option("kernels in the summary")
@click.option("--dry-run", is_flag=True, help="Print the ncu command line and the export/analyze steps; run nothing "
                                              "(wrap the ncu line in srun/mpirun yourself).")
@click.argument("command", nargs=-1, required=True, type=click.UNPROCESSED)
def ncu(range_name: str | None, metric_set: str, machine: str | None, output: Path, top: int, dry_run: bool,
        command: tuple[str, ...]) -> None:
    """Run a script under Nsight Compute with exactly the counters the hierarchical roofline needs,
    then export and analyze the result; kernels are joined to their aten op and nn.Module through the
    NVTX stack. The whole step is profiled, backward and optimizer kernels included (a process-wide NVTX
    range)."""
    from nsroof.collectors import ncu_run
    from nsroof.report.summary import render

    if dry_run:
        click.echo(ncu_run.dry_run(list(command), output, range_name=range_name, metric_set=metric_set))
        return

    report, out, _cmd = ncu_run.run(list(command), output, range_name=range_name, metric_set=metric_set,
                                    machine=machine)
    report.write(out.parquet)
    from nsroof.commands.hints import fold_metrics_hints, metrics_list_path

    report.hints = fold_metrics_hints(report.hints, metrics_list_path(out.parquet))
    click.echo(render(report, top=top, output=str(out.parquet)))
