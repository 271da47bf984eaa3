"""`nsroof profile [--steps N] [--warmup N | --all-steps] [--machine …] -o report.parquet --
python script.py args…`

The script runs in this process (nsroof.collectors.script) inside nsroof.profile; the chrome trace is kept
next to the report (REPORT.trace.json.gz) and the report is built from it, as `nsroof analyze` would.

Default schedule: skip DEFAULT_WARMUP step (the first step pays for torch.compile, cuDNN autotuning, the
allocator's first growth), record DEFAULT_STEPS steps, then stop the profiler, so a long script is not
recorded to its end. A script that marks no more steps than that (no optimizer step, no nsroof.step()) is
recorded whole. --steps / --warmup set the window; --all-steps records everything.
"""

from __future__ import annotations

from pathlib import Path

import click

from nsroof.collectors.script import filtered_stderr, run_script, split_command
from nsroof.commands.options import (
    LoadWatch,
    Progress,
    apply_threads,
    capture_option,
    check_suffix,
    cost_facts_options,
    cost_facts_words,
    machine_option,
    output_option,
    quiet_option,
    remeasure_option,
    steps_warning,
    threads_option,
    top_option,
)

DEFAULT_WARMUP = 1
DEFAULT_STEPS = 3


def trace_path(output: Path) -> Path:
    """report.parquet -> report.trace.json.gz, next to it."""
    return output.with_name(output.name.removesuffix(".parquet") + ".trace.json.gz")


@click.command(context_settings={"ignore_unknown_options": True, "allow_interspersed_args": False})
@click.option("--steps", type=click.IntRange(min=1), metavar="N",
              help=f"Record N steps (optimizer steps, or nsroof.step() marks)  [default: {DEFAULT_STEPS}, "
                   f"after {DEFAULT_WARMUP} warm-up step]")
@click.option("--warmup", type=click.IntRange(min=0), metavar="N",
              help=f"Steps to skip first  [default: {DEFAULT_WARMUP}; none when the script marks no more "
                   "steps]")
@click.option("--all-steps", is_flag=True, help="Record the whole run (no step window).")
@click.option("--compile-steps", is_flag=True,
              help="Keep the steps in which torch.compile compiled (left out as warm-up by default, one more "
                   "step recorded for each; without step marks, the op calls inside the compilations)")
@machine_option(when_omitted="on a GPU its profile cached by `nsroof measure --device cuda`, else its "
                              "datasheet entry; on CPU this CPU's measured profile (measured once, cached)")
@output_option("the report (Parquet); the chrome trace is kept next to it as REPORT.trace.json.gz",
               default=Path("nsroof-profile.parquet"))
@top_option("ops in the summary")
@threads_option()
@remeasure_option("on CPU, measure this CPU's roofline after the run instead of reading the cached one, and "
                  "cache it in its place")
@quiet_option()
@cost_facts_options()
@capture_option()
@click.argument("command", nargs=-1, required=True, type=click.UNPROCESSED)
def profile(steps: int | None, warmup: int | None, all_steps: bool, compile_steps: bool, machine: str | None,
            output: Path,
            top: int, threads: int | None, remeasure: bool, quiet: bool, captures: tuple[Path, ...],
            command: tuple[str, ...]) -> None:
    """Run a Python script under torch.profiler and write a roofline report of every kernel (CUDA) or op
    call (CPU) with analytic FLOPs and bytes from the ledger formulas, e.g.
    `nsroof profile -o r.parquet -- python train.py --epochs 1`."""
    from nsroof.collectors.torch_profile import profile as nsroof_profile
    from nsroof.collectors.torch_profile import render_summary
    from nsroof.report import parquet

    check_suffix(output, (".parquet",), "a report")
    if remeasure and machine is not None:
        raise click.UsageError("--remeasure measures this CPU's roofline; --machine gives the roofline: "
                               "leave out one of them")
    kind, target, args = split_command(command)
    if all_steps and (steps is not None or warmup is not None):
        raise click.UsageError("--all-steps records the whole run: leave out --steps and --warmup")
    default_window = not all_steps and steps is None and warmup is None
    # the warm-up step is skipped whenever the run is windowed and no --warmup says otherwise (the first
    # call's one-time costs would dominate the top op); a script marking no more steps is then recorded whole
    window_optional = not all_steps and warmup is None
    if default_window:
        steps = DEFAULT_STEPS
    if warmup is None:
        warmup = 0 if all_steps else DEFAULT_WARMUP
    apply_threads(threads)  # before the announcement: the cached CPU profile is per thread count
    pending = _announce_cpu_measurement(machine, remeasure)
    progress, load = Progress(quiet), LoadWatch()
    session = nsroof_profile(machine=machine, steps=steps, warmup=warmup, trace=trace_path(output),
                             captures=captures, window_optional=window_optional, remeasure=remeasure,
                             compile_steps=compile_steps)
    # what the printed `nsroof analyze` command needs besides the machine to make this report again
    session.rebuild_options, session.report_path = cost_facts_words(), output
    stop = None
    try:
        with filtered_stderr(), session:
            run_script(kind, target, args)
            # leaving the block stops the profiler and builds the report (and measures the CPU the first time)
            stop = progress.start("building the report"
                                  + (" and measuring this CPU's roofline (once)" if pending else ""))
    except KeyboardInterrupt:
        from nsroof.collectors.rebuild import for_session

        saved = session.interrupted_trace
        click.echo("nsroof: interrupted; " + (f"the trace recorded so far is saved as {saved} "
                                              f"(`{for_session(session, saved)}` makes its report)" if saved
                                              else "nothing was recorded"), err=True)
        raise SystemExit(130) from None
    finally:
        if stop is not None:
            stop()
    result = session.result
    assert result is not None
    asked = "" if default_window else steps_warning(steps, warmup, result.steps_marked, result.step_source)
    warnings = [w for w in (asked, load.warning()) if w]
    metadata = {**result.metadata,
                "collector": "torch.profiler", "command": [kind, target, *args],
                "script": parquet.input_record(target) if kind == "script" else None,
                "trace": str(result.trace), "trace_facts": result.trace_facts,
                "steps": session.steps, "warmup": session.warmup, "default_schedule": default_window,
                "steps_marked": result.steps_marked, "step_source": result.step_source,
                "torch_version": _torch_version(), "rebuild": result.rebuild,
                "warnings": result.warnings + warnings}
    from nsroof.pipeline import Report

    report = Report(result.report, metadata)
    if result.ops is not None:
        report.ops = result.ops
    report.write(output)  # and the op-level rows beside it (REPORT.ops.parquet) when the run has ops
    if not quiet:
        click.echo(render_summary(result, top=top, output=str(output)))
    for w in warnings:
        click.echo(f"warning: {w}", err=True)


def _announce_cpu_measurement(machine: str | None, remeasure: bool = False) -> str:
    """The first CPU run measures the CPU's roofline after the script (about a minute): say so up front.
    Returns where that profile will be cached ('' when nothing is to be measured). --remeasure on a GPU
    (whose roofline is never measured implicitly) is a usage error."""
    import torch

    if machine is not None:
        return ""
    if remeasure and torch.cuda.is_available():
        raise click.UsageError("--remeasure re-measures the CPU's roofline; a GPU's is measured by "
                               "`nsroof measure --device cuda --remeasure`")
    from nsroof.collectors.torch_profile import cpu_profile_pending

    pending = "" if torch.cuda.is_available() else cpu_profile_pending(remeasure)
    if pending:
        what = "re-measuring this CPU's roofline" if remeasure else "no CPU roofline cached yet: measuring it"
        click.echo(f"nsroof: {what} after the run (about a minute; cached in {pending}); --machine skips "
                   "this", err=True)
    return pending


def _torch_version() -> str:
    import torch

    return str(torch.__version__)
