"""`nsroof nsys [--range NAME | --whole] [--warmup-steps W] [-o base] [--dry-run] -- python train.py …`"""

from __future__ import annotations

import shlex
from pathlib import Path

import click

from nsroof.commands.options import machine_option, output_option, top_option


@click.command(context_settings={"ignore_unknown_options": True, "allow_interspersed_args": False})
@click.option("--range", "range_name", help="Profile inside this nsroof range (the script opens it with "
                                             "nsroof.annotate(NAME)) instead of one step.")
@click.option("--whole", is_flag=True, help="Profile the whole script instead of one step.")
@click.option("--warmup-steps", type=int, default=1, show_default=True, metavar="W",
              help="Steps to run before the profiled step (a step ends at nsroof.step() or at an optimizer "
                   "step).")
@click.option("--trace", default="cuda,nvtx,osrt", show_default=True, metavar="APIS",
              help="nsys's --trace: the APIs traced (CUDA for the kernels, NVTX for ops and ranges).")
@click.option("--nsys-args", default="", metavar="WORDS",
              help="Any other `nsys profile` options, as one shell-quoted string.")
@click.option("--keep-report", is_flag=True,
              help="Keep BASE.nsys-rep (it holds the host's environment variables and process list; the "
                   "SQLite export nsroof writes does not).")
@machine_option(when_omitted="the local GPU's measured profile (nsroof measure --device cuda), else its "
                             "datasheet entry")
@output_option("BASE.sqlite (the export), BASE.modules.json and the report BASE.parquet (-o is the base "
               "name)",
               default=Path("nsroof-nsys"))
@top_option("kernels in the summary")
@click.option("--dry-run", is_flag=True, help="Print the nsys profile, export and analyze commands; run "
                                              "nothing.")
@click.argument("command", nargs=-1, required=True, type=click.UNPROCESSED)
def nsys(range_name: str | None, whole: bool, warmup_steps: int, trace: str, nsys_args: str,
         keep_report: bool, machine: str | None, output: Path, top: int, dry_run: bool,
         command: tuple[str, ...]) -> None:
    """Run a script under Nsight Systems with the traces the roofline needs (CUDA kernels and graph nodes,
    NVTX ranges, PyTorch's ops and input sizes through emit_nvtx), then export and analyze the timeline.
    By default one step after warm-up is captured (an NVTX capture range)."""
    from nsroof.collectors import nsys_run
    from nsroof.collectors.ncu_select import make_selection
    from nsroof.report.summary import render

    selection = make_selection(range_name=range_name, whole=whole, warmup_steps=warmup_steps)
    extra = shlex.split(nsys_args)
    if dry_run:
        click.echo(nsys_run.dry_run(list(command), output, selection=selection, trace=trace, extra=extra))
        return
    report, out, _cmd = nsys_run.run(list(command), output, selection=selection, trace=trace, extra=extra,
                                     keep_report=keep_report, machine=machine,
                                     say=lambda line: click.echo(line, err=True))
    report.write(out.parquet)
    click.echo(render(report, top=top, output=str(out.parquet)))
