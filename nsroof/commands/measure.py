"""`nsroof measure`: this device's real roofline (GEMM peaks per dtype, bandwidth per memory level)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

import click

from nsroof.commands.options import (
    Progress,
    apply_threads,
    output_option,
    quiet_option,
    remeasure_option,
    threads_option,
)
from nsroof.errors import InputError, NsroofError

T = TypeVar("T")

DTYPES = ("fp64", "fp32", "tf32", "fp16", "bf16", "fp8")
SECTIONS = ("gemm", "stream", "ladder")


@click.command()
@click.option("--quick", is_flag=True,
              help="Short sweep: under a minute on a 2-core CPU; the sweep `make gpu-check` runs on a GPU.")
@click.option("--dtype", "dtypes", multiple=True, type=click.Choice(DTYPES),
              help="GEMM dtype to sweep; repeat for several (default: all on CUDA, fp32/fp16/bf16 on CPU).")
@click.option("--device", type=click.Choice(["auto", "cpu", "cuda"]), default="auto", show_default=True,
              help="What to measure: auto takes the GPU when torch sees one.")
@threads_option()
@click.option("--only", "sections", multiple=True, type=click.Choice(SECTIONS),
              help="Run only these parts (repeatable; default: all).")
@click.option("--budget", "budget_s", type=float,
              help="Wall-clock seconds for the GEMM sweep (default: 20 quick / 900 full on CPU, 90 / 1200 on "
                   "GPU); points that do not fit are recorded as skipped.")
@output_option("the machine profile (JSON) here too, for `analyze --machine FILE` (a complete one is also "
               "cached)")
@click.option("--csv", "csv_path", type=click.Path(path_type=Path),
              help="Also write every measured point as CSV.")
@remeasure_option("replace the cached profile with this measurement (without it, a cached CPU profile of "
                  "this CPU, thread count and torch is kept, so `nsroof profile` keeps its roofs)")
@quiet_option()
def measure(quick: bool, dtypes: tuple[str, ...], device: str, threads: int | None, sections: tuple[str, ...],
            budget_s: float | None, output: Path | None, csv_path: Path | None, remeasure: bool,
            quiet: bool) -> None:
    """Measure peak FLOP/s per precision and bandwidth per memory level (DRAM, caches) on this GPU or
    CPU, the ridges, and where reference LLM workloads land; save it as a machine profile in nsroof's
    cache (on CPU, the profile `nsroof profile` and `nsroof demo` read) and, with -o, in a file. A CPU
    measurement that fails its physics check (cache levels slower than DRAM, a peak beyond what the vector
    units can issue or far below it) is measured once more, longer, then refused."""
    from nsroof.collectors.measure import to_machine, write_points_csv
    from nsroof.collectors.measure.cache import refusal, store
    from nsroof.collectors.measure.render import render
    from nsroof.collectors.measure.runner import failed_checks, measure_checked

    for path in (output, csv_path):
        if path is not None:
            _check_writable(path)  # fail before a minute of measuring, not after
    progress = Progress(quiet)
    apply_threads(threads)  # for the whole command: the CPU cache key holds the thread count
    result, first = measure_checked(device, quick=quick, dtypes=tuple(dtypes) or None,
                                    threads=threads or None, sections=tuple(sections) or SECTIONS,
                                    progress=progress.line, gemm_budget_s=budget_s)
    echo = click.echo if not quiet else (lambda *a, **k: None)  # -q: nothing but errors
    echo(render(result))
    if failed_checks(result):
        if csv_path is not None:  # the raw points are evidence, even of a refused profile
            _writing(lambda: write_points_csv(result.points, csv_path), csv_path)
        kept = f"; its points are in {csv_path}" if csv_path is not None else ""
        raise NsroofError(refusal(result, first, f"it is neither cached nor written{kept}"))
    machine = to_machine(result)
    cached, why_not = cache_path(result)
    done = _writing(lambda: store(machine, cached, replace=remeasure), cached) if cached is not None \
        else f"not cached: {why_not}"
    if output is not None:
        _writing(lambda: machine.save(output), output)
    if csv_path is not None:
        _writing(lambda: write_points_csv(result.points, csv_path), csv_path)
    cpu = result.environment.get("device") == "cpu"
    echo(f"\n{done}" + (" (the CPU profile `nsroof profile` and `nsroof demo` read at these threads)"
                        if cpu and done.startswith("cached as") else ""))
    if output is not None:
        echo(f"\nwrote {output} (use: nsroof analyze --machine {output} …)")
    if csv_path is not None:
        echo(f"wrote {csv_path} ({len(result.points)} points)")


def _writing(write: Callable[[], T], path: Path) -> T:
    try:
        return write()
    except OSError as exc:
        raise InputError(exc.filename or path, f"cannot write: {exc.strerror or exc}",
                         hint="choose a writable path") from None


def _check_writable(path: Path) -> None:
    import tempfile

    if path.is_dir():
        raise InputError(path, "is a folder", hint="give a file name, e.g. machine.json")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=path.parent, prefix=f".{path.name}.", suffix=".probe"):
            pass
    except OSError as exc:
        raise InputError(path, f"cannot write here: {exc.strerror or exc}",
                         hint="choose a writable path") from None


def cache_path(result: object) -> tuple[Path | None, str]:
    """Where a measurement is cached: on CPU the file `nsroof profile` reads (keyed on CPU model, torch
    threads and versions), on a GPU one per device name. A partial measurement (--only, or on a CPU a --dtype
    without the default ones) is not cached: it would pass for a complete one. (path, '') or (None, why)."""
    from nsroof.collectors.measure.cache import cpu_cache_path, gpu_cache_path, partial_reason

    peaks, bandwidths = getattr(result, "peak_flop_per_s", {}), getattr(result, "bandwidth_bytes_per_s", {})
    env = getattr(result, "environment", {})
    plan = getattr(result, "plan", None)
    if env.get("device") == "cpu":
        swept = {"sections": getattr(plan, "sections", ()), "dtypes": getattr(plan, "dtypes", ())}
        why = partial_reason(swept, peaks, bandwidths)
        return (None, f"{why}: measure without it to cache a profile `nsroof profile` can use") if why \
            else (cpu_cache_path(), "")
    if not peaks or not bandwidths:
        return None, ("only part of the roofline was measured (--only): run without --only to cache a "
                      "profile `nsroof profile` can use")
    return gpu_cache_path(str(env.get("device_name", "gpu"))), ""
