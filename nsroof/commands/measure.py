"""`nsroof measure`: this device's real roofline (GEMM peaks per dtype, bandwidth per memory level)."""

from __future__ import annotations

import time
from pathlib import Path

import click

from nsroof.errors import InputError

DTYPES = ("fp32", "tf32", "fp16", "bf16", "fp8")
SECTIONS = ("gemm", "stream", "ladder")


@click.command()
@click.option("--quick", is_flag=True, help="Short sweep: under a minute on a 2-core CPU; the sweep `make gpu-check` runs on a GPU.")
@click.option("--dtype", "dtypes", multiple=True, type=click.Choice(DTYPES),
              help="GEMM dtype to sweep; repeat for several (default: all on CUDA, fp32/fp16/bf16 on CPU).")
@click.option("--device", type=click.Choice(["auto", "cpu", "cuda"]), default="auto", show_default=True,
              help="What to measure: auto takes the GPU when torch sees one.")
@click.option("--threads", type=int, help="torch CPU threads (default: torch's own choice).")
@click.option("--only", "sections", multiple=True, type=click.Choice(SECTIONS),
              help="Run only these parts (repeatable; default: all).")
@click.option("--budget", "budget_s", type=float,
              help="Wall-clock seconds for the GEMM sweep (default: 20 quick / 900 full on CPU, 90 / 1200 on GPU); "
                   "points that do not fit are recorded as skipped.")
@click.option("-o", "--output", type=click.Path(path_type=Path),
              help="Write the machine profile (JSON) here; use it with `analyze --machine FILE`.")
@click.option("--csv", "csv_path", type=click.Path(path_type=Path), help="Also write every measured point as CSV.")
def measure(quick: bool, dtypes: tuple[str, ...], device: str, threads: int | None, sections: tuple[str, ...],
            budget_s: float | None, output: Path | None, csv_path: Path | None) -> None:
    """Measure peak FLOP/s per precision and bandwidth per memory level (DRAM, caches) on this GPU or
    CPU, the ridges, and where reference LLM workloads land; save it as a machine profile."""
    from nsroof.collectors.measure import measure as run
    from nsroof.collectors.measure import to_machine, write_points_csv
    from nsroof.collectors.measure.summary import render

    for path in (output, csv_path):
        if path is not None:
            _check_writable(path)  # fail before a minute of measuring, not after
    t0 = time.perf_counter()

    def progress(message: str) -> None:
        click.echo(f"[{time.perf_counter() - t0:6.1f} s] {message}", err=True)

    result = run(device, quick=quick, dtypes=tuple(dtypes) or None, threads=threads,
                 sections=tuple(sections) or SECTIONS, progress=progress, gemm_budget_s=budget_s)
    machine = to_machine(result)
    try:
        if output is not None:
            machine.save(output)
        if csv_path is not None:
            write_points_csv(result.points, csv_path)
    except OSError as exc:
        raise InputError(exc.filename or output or csv_path or "", f"cannot write: {exc.strerror or exc}",
                         hint="choose a writable path") from None
    click.echo(render(result))
    if output is not None:
        click.echo(f"\nwrote {output} (use: nsroof analyze --machine {output} …)")
    if csv_path is not None:
        click.echo(f"wrote {csv_path} ({len(result.points)} points)")


def _check_writable(path: Path) -> None:
    import tempfile

    if path.is_dir():
        raise InputError(path, "is a folder", hint="give a file name, e.g. machine.json")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=path.parent, prefix=f".{path.name}.", suffix=".probe"):
            pass
    except OSError as exc:
        raise InputError(path, f"cannot write here: {exc.strerror or exc}", hint="choose a writable path") from None
