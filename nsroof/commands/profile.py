"""`nsroof profile [--steps N] [--warmup N] [--machine …] -o report.parquet -- python script.py args…`

The script runs in this process (nsroof.collectors.script) inside nsroof.profile; the chrome trace is kept
next to the report (REPORT.trace.json.gz) and the report is built from it, as `nsroof analyze` would.
"""

from __future__ import annotations

from pathlib import Path

import click

from nsroof.collectors.script import run_script, split_command


def trace_path(output: Path) -> Path:
    """report.parquet -> report.trace.json.gz, next to it."""
    return output.with_name(output.name.removesuffix(".parquet") + ".trace.json.gz")


@click.command(context_settings={"ignore_unknown_options": True, "allow_interspersed_args": False})
@click.option("--steps", type=click.IntRange(min=1), help="Record N steps (optimizer steps, or nsroof.step() marks).")
@click.option("--warmup", type=click.IntRange(min=0), default=0, show_default=True, help="Steps to skip first.")
@click.option("--machine", help="Machine ceilings: a name from `nsroof machines` or a JSON profile; default: the "
                                "GPU's datasheet entry, or the measured CPU profile on CPU.")
@click.option("-o", "--output", type=click.Path(path_type=Path), default=Path("nsroof-profile.parquet"),
              show_default=True, help="Report file; the chrome trace is kept next to it as REPORT.trace.json.gz.")
@click.option("--top", default=10, show_default=True, help="Ops listed in the summary.")
@click.argument("command", nargs=-1, required=True, type=click.UNPROCESSED)
def profile(steps: int | None, warmup: int, machine: str | None, output: Path, top: int, command: tuple[str, ...]) -> None:
    """Run a Python script under torch.profiler and write a roofline report of every kernel (CUDA) or op
    call (CPU) with analytic FLOPs and bytes from the ledger formulas, e.g.
    `nsroof profile -o r.parquet -- python train.py --epochs 1`."""
    from nsroof.collectors.torch_profile import profile as nsroof_profile
    from nsroof.collectors.torch_profile import render_summary
    from nsroof.report import parquet

    kind, target, args = split_command(command)
    _announce_cpu_measurement(machine)
    session = nsroof_profile(machine=machine, steps=steps, warmup=warmup, trace=trace_path(output))
    with session:
        run_script(kind, target, args)
    result = session.result
    assert result is not None
    metadata = {**result.metadata,
                "collector": "torch.profiler", "command": [kind, target, *args],
                "script": parquet.input_record(target) if kind == "script" else None,
                "trace": str(result.trace), "trace_facts": result.trace_facts,
                "steps": steps, "warmup": warmup,
                "steps_marked": result.steps_marked, "step_source": result.step_source,
                "warnings": result.warnings}
    parquet.write(result.report, output, metadata=metadata)
    click.echo(render_summary(result, top=top, output=str(output)))


def _announce_cpu_measurement(machine: str | None) -> None:
    """The first CPU run measures the CPU's roofline after the script (about a minute): say so up front."""
    if machine is not None:
        return
    import torch

    from nsroof.collectors.torch_profile import cpu_profile_pending

    pending = "" if torch.cuda.is_available() else cpu_profile_pending()
    if pending:
        click.echo(f"nsroof: no CPU roofline cached yet: measuring it after the run (about a minute, once; "
                   f"cached in {pending}); --machine skips this", err=True)
