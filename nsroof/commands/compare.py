"""`nsroof compare BEFORE AFTER`: what changed after an optimization, per kernel and per NVTX range."""

from __future__ import annotations

from pathlib import Path

import click

from nsroof.commands.options import machine_option, output_option, top_option


@click.command()
@click.argument("before", type=click.Path(path_type=Path))
@click.argument("after", type=click.Path(path_type=Path))
@top_option("kernels listed", default=20, order="largest time change first")
@click.option("--ranges/--no-ranges", default=True, show_default=True, help="Also compare per NVTX range.")
@machine_option(when_omitted="for inputs that are raw exports, the datasheet entry of the GPU each names")
@output_option("every kernel row: .csv or .parquet (per-range rows go to <name>.ranges.<ext>)")
@click.option("--json", "as_json", is_flag=True, help="Print the kernel and range tables as JSON.")
def compare(before: Path, after: Path, top: int, ranges: bool, machine: str | None, output: Path | None,
            as_json: bool) -> None:
    """Compare two reports (.parquet), datasets (folders written by `nsroof analyze -o DIR`) or exports
    (analyzed on the fly): kernels matched by function name + NVTX path (torch emit_nvtx's seq / op_id /
    input_op_ids counters ignored, sizes kept); the change in time, in bytes at DRAM/L2/L1 and in bound."""
    from nsroof.report import compare as cmp

    a = cmp.load_side(before, machine=machine)
    b = cmp.load_side(after, machine=machine)
    kernels = cmp.compare_kernels(a, b)
    per_range = cmp.compare_ranges(a, b) if ranges else None
    if output is not None:
        _write(kernels, output)
        if per_range is not None:
            _write(per_range, output.with_name(f"{output.stem}.ranges{output.suffix}"))
    if as_json:
        import json

        doc = {"kernels": _records(kernels), "ranges": _records(per_range) if per_range is not None else []}
        click.echo(json.dumps(doc, indent=1))
        return
    click.echo(cmp.render(kernels, per_range, top=top, before_name=str(before), after_name=str(after)))


def _records(frame):  # type: ignore[no-untyped-def]
    import json

    return json.loads(frame.to_json(orient="records"))


def _write(frame, path: Path) -> None:  # type: ignore[no-untyped-def]
    from nsroof.atomic import atomic_path
    from nsroof.errors import NsroofError

    suffix = path.suffix.lower()
    if suffix not in (".csv", ".parquet"):
        raise NsroofError(f"{path}: -o writes .csv or .parquet, not '{suffix or 'no extension'}'")
    with atomic_path(path) as tmp:
        if suffix == ".csv":
            frame.to_csv(tmp, index=False)
        else:
            frame.to_parquet(tmp, index=False)
