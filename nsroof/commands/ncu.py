"""`nsroof ncu [selection] [--set roofline|minimal|NCU_SET] [-o report] [--dry-run] -- python train.py …`"""

from __future__ import annotations

from pathlib import Path

import click

from nsroof.commands.options import machine_option, output_option, top_option

NCU_OPTIONS_HELP = "ncu's own option, passed to ncu (never to the script)"


@click.command(context_settings={"ignore_unknown_options": True, "allow_interspersed_args": False})
@click.option("--range", "range_name", help="Profile the kernels inside this nsroof range (the script opens "
                                             "it with nsroof.annotate(NAME)) instead of one step.")
@click.option("--whole", is_flag=True,
              help="Profile the whole script (bound it with -c N) instead of one step.")
@click.option("--warmup-steps", type=int, default=1, show_default=True, metavar="W",
              help="Steps to skip before the profiled step (a step ends at nsroof.step() or at an optimizer "
                   "step).")
@click.option("-k", "--kernel-name", help=f"{NCU_OPTIONS_HELP}: kernel name, or regex:EXPR (default: every "
                                          "kernel but NCCL's, regex:^(?!nccl)).")
@click.option("-c", "--launch-count", type=int, metavar="N",
              help=f"{NCU_OPTIONS_HELP}: profile at most N kernels.")
@click.option("-s", "--launch-skip", type=int, metavar="N",
              help=f"{NCU_OPTIONS_HELP}: skip the first N matching kernels.")
@click.option("--replay-mode", help=f"{NCU_OPTIONS_HELP}: kernel (default), application, range or app-range.")
@click.option("--target-processes", help=f"{NCU_OPTIONS_HELP}: all (default) or application-only.")
@click.option("--clock-control", help=f"{NCU_OPTIONS_HELP}: base (ncu's default: locks base clocks) or none "
                                      "(leaves them; recorded in the report).")
@click.option("--include-nccl", is_flag=True,
              help="Profile NCCL kernels too (under kernel replay a collective can hang).")
@click.option("--ncu-args", default="", metavar="WORDS",
              help="Any other ncu options, as one shell-quoted string.")
@click.option("--set", "metric_set", default="roofline", show_default=True, metavar="SET",
              help="roofline: FLOPs of every precision, DRAM/L2/L1 bytes and the ceilings' counters; "
                   "minimal: time, FP32/FP64 FLOPs and DRAM bytes (fewer replay passes); any other name is "
                   "an ncu section set (ncu --set NAME), collected beside the roofline counters.")
@machine_option(when_omitted="the local GPU's measured profile (nsroof measure --device cuda), else its "
                             "datasheet entry")
@output_option("BASE.ncu-rep, BASE.log, BASE.csv and the report BASE.parquet (-o is the base name)",
               default=Path("nsroof-ncu"))
@top_option("kernels in the summary")
@click.option("--dry-run", is_flag=True, help="Print the ncu command line, an estimate of its time and the "
                                              "export/analyze steps; run nothing (wrap the ncu line in "
                                              "srun/mpirun yourself).")
@click.argument("command", nargs=-1, required=True, type=click.UNPROCESSED)
def ncu(range_name: str | None, whole: bool, warmup_steps: int, kernel_name: str | None,
        launch_count: int | None, launch_skip: int | None, replay_mode: str | None,
        target_processes: str | None, clock_control: str | None, include_nccl: bool, ncu_args: str,
        metric_set: str, machine: str | None, output: Path, top: int, dry_run: bool,
        command: tuple[str, ...]) -> None:
    """Run a script under Nsight Compute with exactly the counters the hierarchical roofline needs,
    then export and analyze the result; kernels are joined to their aten op and nn.Module through the
    NVTX stack. By default one step after warm-up is profiled, backward and optimizer kernels included
    (a process-wide NVTX range), NCCL kernels left out."""
    from nsroof.collectors import ncu_run
    from nsroof.collectors.ncu_select import make_selection
    from nsroof.report.summary import render

    selection = make_selection(range_name=range_name, whole=whole, warmup_steps=warmup_steps,
                               kernel_name=kernel_name, launch_count=launch_count, launch_skip=launch_skip,
                               replay_mode=replay_mode,
                               target_processes=target_processes, clock_control=clock_control,
                               metric_set=metric_set, include_nccl=include_nccl, ncu_args=ncu_args)
    if dry_run:
        click.echo(ncu_run.dry_run(list(command), output, selection=selection, metric_set=metric_set))
        return

    report, out, _cmd = ncu_run.run(list(command), output, selection=selection, metric_set=metric_set,
                                    machine=machine, say=lambda line: click.echo(line, err=True))
    report.write(out.parquet)
    from nsroof.commands.hints import fold_metrics_hints, metrics_list_path

    report.hints = fold_metrics_hints(report.hints, metrics_list_path(out.parquet))
    click.echo(render(report, top=top, output=str(out.parquet)))
