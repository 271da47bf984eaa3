"""`nsroof compare BEFORE AFTER`: what changed after an optimization, per kernel and per NVTX range."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import click

from nsroof.commands.options import check_suffix, machine_option, output_option, selection_options, top_option


@click.command()
@click.argument("before", type=click.Path(path_type=Path))
@click.argument("after", type=click.Path(path_type=Path))
@top_option("kernels listed", default=20, order="largest time change first")
@click.option("--ranges/--no-ranges", default=True, show_default=True, help="Also compare per NVTX range.")
@machine_option(when_omitted="for inputs that are raw exports, the datasheet entry of the GPU each names")
@output_option("every kernel row: .csv or .parquet (per-range rows go to <name>.ranges.<ext>)")
@click.option("--json", "as_json", is_flag=True, help="Print the kernel and range tables as JSON.")
@click.option("--csv", "as_csv", is_flag=True, help="Print the kernel table as CSV.")
@click.option("--html", "html_out", type=click.Path(path_type=Path), default=None,
              help="Also write the comparison as a self-contained HTML page, side by side: totals, then "
                   "time, FLOPs, DRAM bytes and bound per kernel (op) and per NVTX range.")
@click.option("--per", type=click.Choice(["auto", "run", "step", "launch"]), default="auto",
              show_default=True,
              help="Normalise: per step (both step counts known), per launch (before scaled to the after "
                   "run's launch counts), or per run (as measured); auto picks step, then launch when launch "
                   "counts differ.")
@selection_options()
def compare(before: Path, after: Path, top: int, ranges: bool, machine: str | None, output: Path | None,
            as_json: bool, as_csv: bool, per: str, selection: Any, html_out: Path | None) -> None:
    """Compare two reports (.parquet), datasets (folders written by `nsroof analyze -o DIR`) or exports
    (analyzed on the fly): kernels (or CPU ops) matched by function name + NVTX path (torch emit_nvtx's
    seq / op_id / input_op_ids counters and step numbers ignored, sizes kept), normalised per step or
    per launch when the runs did different amounts of work; the change in time, in bytes at
    DRAM/L2/L1 and in bound, and a warning when devices, ncu versions, clocks or step counts differ."""
    from nsroof.report import compare as cmp

    if as_json and as_csv:
        raise click.UsageError("give one of --json and --csv")
    check_suffix(output, (".csv", ".parquet"), "the comparison")
    check_suffix(html_out, (".html", ".htm"), "the comparison page")
    a, meta_a = _side(before, machine)
    b, meta_b = _side(after, machine)
    a, b = selection.apply(a, what=str(before)), selection.apply(b, what=str(after))
    answer = cmp.empty_answer(a, b, (str(before), str(after)))
    if answer:  # one line, in the form asked for
        click.echo(json.dumps({"per": None, "steps": [], "warnings": [answer], "kernels": [], "ranges": []})
                   if as_json else answer)
        return
    result = cmp.compare(a, b, per=per, ranges=ranges, metadata=(meta_a, meta_b))
    kernels, per_range = result.kernels, result.ranges
    if html_out is not None:
        from nsroof.report import compare_html

        compare_html.write(result, html_out, before_name=str(before), after_name=str(after),
                           title=f"nsroof compare {before.name} → {after.name}")
    if output is not None:
        _write(kernels, output)
        if per_range is not None:
            _write(per_range, output.with_name(f"{output.stem}.ranges{output.suffix}"))
    if as_csv:
        click.echo(kernels.to_csv(index=False), nl=False)
        return
    if as_json:
        doc = {"per": result.per, "steps": list(result.steps), "warnings": result.warnings,
               "kernels": _records(kernels), "ranges": _records(per_range) if per_range is not None else []}
        click.echo(json.dumps(doc, indent=1))
        return
    click.echo(cmp.render(result, top=top, before_name=str(before), after_name=str(after)))


def _side(path: Path, machine: str | None) -> tuple[Any, dict[str, Any]]:
    """A report file or a dataset folder as written, or an export analyzed now: (frame, metadata)."""
    from nsroof.errors import InputError
    from nsroof.report import compare as cmp
    from nsroof.report import parquet

    if not path.exists():
        raise InputError(path, "no such file or directory",
                         hint="pass a report (.parquet), a dataset folder or an export")
    if path.is_dir() or _is_parquet(path):
        frame, metadata = parquet.load(path), parquet.read_metadata(path)
    else:
        from nsroof.pipeline import analyze

        report = analyze([path], machine=machine)
        frame, metadata = report.frame, report.metadata
    missing = cmp.missing_columns(frame)
    if missing:
        raise InputError(os.fspath(path), f"not an nsroof report: lacks columns {', '.join(missing)}",
                         hint="run `nsroof analyze` on it first")
    return frame, metadata


def _is_parquet(p: Path) -> bool:
    with open(p, "rb") as fh:
        return fh.read(4) == b"PAR1"


def _records(frame):  # type: ignore[no-untyped-def]
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
