"""`nsroof demo`: profile the tiny transformer training step on the CPU and print its roofline summary, then
analyze the packaged example Nsight Compute export when the package has one."""

from __future__ import annotations

from pathlib import Path

import click

from nsroof.commands.options import (
    Progress,
    apply_threads,
    check_suffix,
    machine_option,
    output_option,
    quiet_option,
    remeasure_option,
    threads_option,
    top_option,
)

EXAMPLE_EXPORT = Path(__file__).resolve().parents[1] / "data" / "examples" / "example_details.csv"


@click.command()
@click.option("--steps", default=3, show_default=True, type=click.IntRange(min=1),
              help="Training steps recorded.")
@click.option("--warmup", default=1, show_default=True, type=click.IntRange(min=0),
              help="Steps run first, not recorded.")
@machine_option(when_omitted="this CPU's measured profile (measured on first use, about a minute, then "
                             "cached)")
@threads_option(default=1)
@output_option("the report of the profiled steps", default=Path("nsroof-demo.parquet"))
@top_option("ops in the summary")
@remeasure_option("measure this CPU's roofline after the steps instead of reading the cached one, and "
                  "cache it in its place")
@quiet_option()
def demo(steps: int, warmup: int, machine: str | None, threads: int, output: Path, top: int, remeasure: bool,
         quiet: bool) -> None:
    """The main job on any machine: a small transformer (embedding, causal attention, MLP, layer norm,
    AdamW) profiled on the CPU, every op call classified against the CPU's roofline."""
    import torch

    from nsroof.collectors.script import filtered_stderr
    from nsroof.collectors.torch_profile import profile, render_summary
    from nsroof.examples import train_tiny
    from nsroof.report import parquet

    echo = _silent if quiet else click.echo  # -q: nothing but errors
    check_suffix(output, (".parquet",), "a report")
    if remeasure and machine is not None:
        raise click.UsageError("--remeasure measures this CPU's roofline; --machine gives the roofline: "
                               "leave out one of them")
    apply_threads(threads)
    cfg = train_tiny.Config()
    echo(f"Profiling nsroof.examples.train_tiny on the CPU: {cfg.layers} layers, d_model {cfg.d_model}, "
               f"{cfg.heads} heads, batch {cfg.batch}×{cfg.seq} tokens; {warmup} warm-up + {steps} recorded "
               f"step(s), {torch.get_num_threads()} thread(s)")
    if machine is None:
        from nsroof.collectors.torch_profile import cpu_profile_pending

        pending = cpu_profile_pending(remeasure)
        echo("Ceilings: this CPU's measured roofline (nsroof measure's quick CPU sweep" +
                   (f"; not cached yet: measured after the steps, about a minute, saved to {pending})"
                    if pending else ", cached)"))
    trace = output.with_name(output.name.removesuffix(".parquet") + ".trace.json.gz")
    session = profile(machine=machine, steps=steps, warmup=warmup, cuda=False, trace=trace,
                      remeasure=remeasure)
    with Progress(quiet).waiting("training, profiling and building the report"):
        with filtered_stderr(), session:
            train_tiny.train(warmup + steps, cfg)
    result = session.result
    assert result is not None
    example = Path(train_tiny.__file__)
    parquet.write(result.report, output, metadata={
        **result.metadata, "collector": "torch.profiler", "script": parquet.input_record(example),
        "trace": str(result.trace), "demo": True, "steps": steps, "warmup": warmup,
        "threads": torch.get_num_threads()})
    echo("")
    echo(render_summary(result, top=top, output=str(output)))

    if EXAMPLE_EXPORT.is_file():
        from nsroof.pipeline import analyze
        from nsroof.report.summary import render

        example_out = output.with_name(output.stem + "-ncu-example.parquet")
        report = analyze([EXAMPLE_EXPORT])
        report.write(example_out)
        echo("")
        echo(f"The packaged Nsight Compute example ({EXAMPLE_EXPORT.name}), analyzed at DRAM, L2 and L1:")
        echo(render(report, top=top, output=str(example_out)))


def _silent(*args: object, **kwargs: object) -> None:
    return None
