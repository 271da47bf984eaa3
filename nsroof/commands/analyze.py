"""`nsroof analyze EXPORT…`: the main job."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import click

from nsroof.commands.options import (
    Progress,
    capture_option,
    check_suffix,
    cost_facts_options,
    machine_option,
    output_option,
    quiet_option,
    selection_options,
    table_output_options,
    top_option,
)
from nsroof.errors import InputError


@click.command()
@click.argument("inputs", nargs=-1, required=True, type=click.Path(path_type=Path))
@output_option("the report file (default: next to the input); with several inputs or a directory, the "
               "dataset folder")
@machine_option(when_omitted="the datasheet entry of the GPU each export names")
@click.option("--aggregate", is_flag=True,
              help="Merge repeated launches of the same kernel under the same NVTX path.")
@click.option("--ledger", "ledger", type=click.Path(path_type=Path),
              help="YAML/JSON map of kernel patterns to ledger formulas.")
@top_option("kernels (or kernel names, with --by name) in the summary")
@click.option("--by", type=click.Choice(["kernel", "name", "category", "step", "phase"]), default="kernel",
              show_default=True,
              help="kernel: the longest kernels; name: time per kernel name across launches (count, total, "
                   "share, bound, roof fraction), in the summary and in --json/--csv; category, step, phase: "
                   "--json/--csv print the time per category of work, per recorded step, or per phase "
                   "(prefill/decode) that the summary shows.")
@click.option("-j", "--jobs", type=int, default=None,
              help="Dataset mode: worker processes (default: the number of cores).")
@click.option("--executor", type=click.Choice(["local", "dask"]), default="local", show_default=True,
              help="Dataset mode: a local process pool, or an existing Dask cluster.")
@click.option("--scheduler",
              help="Dataset mode with --executor dask: the scheduler address, e.g. tcp://10.0.0.1:8786.")
@click.option("--overwrite", is_flag=True, help="Dataset mode: replace partitions that already exist.")
@click.option("--name-template",
              help="Dataset mode: file-name pattern giving host/rank, e.g. 'prof_%h_%q{RANK}.ncu-rep'.")
@capture_option()
@selection_options()
@table_output_options("one wide row per kernel (time, and intensity, bound and roof fraction per level)")
@quiet_option()
@cost_facts_options()
def analyze(inputs: tuple[Path, ...], output: Path | None, machine: str | None, aggregate: bool,
            ledger: Path | None, top: int, by: str, jobs: int | None, executor: str, scheduler: str | None,
            overwrite: bool, name_template: str | None, captures: tuple[Path, ...], quiet: bool,
            as_json: bool, as_csv: bool, selection: Any) -> None:
    """Classify every kernel of Nsight Compute exports (CSV of any version/locale, .ncu-rep) or
    torch.profiler traces at DRAM, L2 and L1, and write a Parquet report.

    One file gives one report file. Several files, globs or directories (or -o naming an existing
    folder) give one dataset folder under -o DIR that pandas.read_parquet(DIR) loads; a failed input is
    listed and the others still land (exit code 1 when any failed).

    --kernel/--nvtx/--step/--device/--source keep only the matching kernels (in the report written too);
    --json or --csv print one row per kernel (per kernel name with --by name) on stdout instead of the
    summary; -q prints nothing but errors. A report nsroof wrote (REPORT.parquet, REPORT.ops.parquet) is
    shown as it was analyzed: the summary, --json/--csv and the selection work on it (-o writes the
    selected rows); the options that change an analysis (--machine, --ledger, …) apply to its export."""
    if as_json and as_csv:
        raise click.UsageError("--json and --csv print the same table: give one of them")
    dataset_mode = (len(inputs) > 1 or any(p.is_dir() for p in inputs) or executor == "dask"
                    or jobs is not None or (output is not None and output.is_dir()))
    if dataset_mode:
        if captures:
            raise InputError(os.fspath(captures[0]), "--capture works on one replay trace at a time",
                             hint="analyze each replay trace separately with its --capture")
        if selection:
            raise click.UsageError(f"{selection.describe()} selects kernels of one input; a dataset keeps "
                                   "every kernel (select when reading it: nsroof plot/report/compare DIR "
                                   "--kernel …)")
        _analyze_dataset(inputs, output, machine, aggregate, ledger, jobs, executor, scheduler, overwrite,
                         name_template, Progress(quiet))
        return

    from nsroof import digest

    # hashing first: it runs on another core while pandas and pyarrow are imported below (the importers'
    # sniff among them, which tells a report nsroof wrote from an export)
    digests = digest.start(inputs)
    from nsroof.importers import sniff

    if sniff(inputs[0]) == "parquet":
        _show_report(inputs[0], output, top=top, by=by, quiet=quiet, as_json=as_json, as_csv=as_csv,
                     selection=selection, analysis_options=_analysis_options(
                         machine=machine, aggregate=aggregate, ledger=ledger, captures=captures))
        return
    from nsroof.commands.hints import fold_metrics_hints, metrics_list_path
    from nsroof.pipeline import analyze as run
    from nsroof.pipeline import default_output

    out = output or default_output(inputs[0])
    if out.exists() and inputs[0].exists() and out.resolve() == inputs[0].resolve():
        raise InputError(os.fspath(out), "the output would overwrite the input export",
                         hint="choose another -o path, e.g. report.parquet")
    check_suffix(output, (".parquet",), "a report")
    with Progress(quiet).waiting(f"analyzing {inputs[0]}"):
        report = run(list(inputs), machine=machine, aggregate=aggregate, ledger=ledger, digests=digests,
                     captures=captures)
    if selection:
        report.frame = selection.apply(report.frame, what=str(inputs[0]))
        report.metadata["selection"] = selection.describe()
    report.hints = fold_metrics_hints(report.hints, metrics_list_path(out))
    report.metadata["hints"] = [str(h) for h in report.hints]  # as shown: the report re-renders the same
    report.write(out)
    if as_json or as_csv:
        click.echo(script_output(report, as_json=as_json, by=by), nl=False)
    elif not quiet:
        from nsroof.report.summary import render

        click.echo(render(report, top=top, output=str(out), by=by))


def _analysis_options(**given: Any) -> list[str]:
    """The options given that change how an export is analyzed (as typed: --machine, --capture, …),
    the cost-facts ones read from click's context (their decorator consumes them)."""
    params = {**given, **{k: v for k, v in click.get_current_context().params.items()
                          if k in ("model_config", "formulas")}}
    names = {"machine": "--machine", "aggregate": "--aggregate", "ledger": "--ledger",
             "captures": "--capture", "model_config": "--model-config", "formulas": "--formulas"}
    return [option for key, option in names.items() if params.get(key) not in (None, False, (), [])]


def _show_report(path: Path, output: Path | None, *, top: int, by: str, quiet: bool, as_json: bool,
                 as_csv: bool, selection: Any, analysis_options: list[str]) -> None:
    """A report nsroof wrote, shown as `nsroof analyze` showed it (its rows, metadata, warnings and hints,
    and the op-level rows beside it), selected and re-written on request; any other Parquet file is
    refused in one line."""
    import pyarrow as pa

    from nsroof.pipeline import Report, ops_path
    from nsroof.report import parquet
    from nsroof.report.load import load_report

    try:
        metadata = parquet.read_metadata(path)
    except (pa.ArrowException, OSError, ValueError) as exc:
        cause = " ".join(str(exc).split())[:200] or type(exc).__name__
        raise InputError(path, f"an unreadable Parquet file ({cause})",
                         hint="analyze the ncu export or torch trace it came from") from None
    if not metadata:
        raise InputError(path, "a Parquet file without nsroof's metadata: not a report nsroof wrote, nor "
                         "an export", hint="analyze the ncu export or torch trace it came from "
                         "(pandas.read_parquet reads the table)")
    if analysis_options:
        came_from = next((i.get("path") for i in metadata.get("inputs") or [] if isinstance(i, dict)), None)
        raise InputError(path, f"a report nsroof wrote, already analyzed: {analysis_options[0]} changes how "
                         "an export is analyzed", hint=f"analyze {came_from or 'the export it came from'} "
                         f"again with {' '.join(analysis_options)}")
    frame, metadata = load_report(path)
    beside = ops_path(path)
    report = Report(frame, metadata, warnings=list(metadata.get("warnings") or []),
                    hints=list(metadata.get("hints") or []))
    if beside.is_file() and beside != path:
        report.ops = load_report(beside)[0]
    if selection:
        report.frame = selection.apply(report.frame, what=str(path))
        report.metadata["selection"] = selection.describe()
    if output is not None:
        if output.exists() and output.resolve() == path.resolve():
            raise InputError(os.fspath(output), "the output would overwrite the report shown",
                             hint="choose another -o path, or leave -o out")
        check_suffix(output, (".parquet",), "a report")
        report.write(output)
    if as_json or as_csv:
        click.echo(script_output(report, as_json=as_json, by=by), nl=False)
    elif not quiet:
        from nsroof.report.summary import render

        click.echo(render(report, top=top, output=str(output or path), by=by))


def script_output(report: Any, *, as_json: bool, by: str = "kernel") -> str:
    """The wide per-kernel table (nsroof.report.wide.script_table) of a Report (or its frame), or with by=
    "name" the time per kernel name (nsroof.report.summary.by_name), by="category"/"step"/"phase" the tables
    of nsroof.report.breakdown, as JSON records or CSV text."""
    from nsroof.report import breakdown
    from nsroof.report.summary import by_name
    from nsroof.report.wide import script_table

    frame = getattr(report, "frame", report)
    tables = {"name": by_name, "category": breakdown.category_table, "phase": breakdown.phase_table,
              "step": lambda _: breakdown.step_table(getattr(report, "metadata", {}) or {})}
    table = tables.get(by, script_table)(frame)
    if as_json:
        import json

        import msgspec

        # through pandas' encoder (NaN -> null, numpy scalars), full precision; then Python's floats and '/'
        # unescaped, and indented by msgspec (json.dumps' own indent is its pure-Python encoder: 3x slower)
        records = msgspec.json.decode(table.to_json(orient="records", double_precision=15))
        return msgspec.json.format(json.dumps(records, ensure_ascii=False), indent=1) + "\n"
    return str(table.to_csv(index=False))


def _analyze_dataset(inputs: tuple[Path, ...], output: Path | None, machine: str | None, aggregate: bool,
                     ledger: Path | None, jobs: int | None, executor: str, scheduler: str | None,
                     overwrite: bool, name_template: str | None, progress_line: Progress) -> None:
    from nsroof.dataset import analyze_many

    if output is None:
        raise InputError(os.fspath(inputs[0]), "several inputs make a dataset, which needs a folder",
                         hint="add -o DIR")
    if ledger is not None:
        raise InputError(os.fspath(ledger), "--ledger works on one input at a time",
                         hint="analyze each export separately with --ledger")

    def progress(outcome, done: int, total: int) -> None:  # type: ignore[no-untyped-def]
        status = "ok" if outcome.ok else "FAILED"
        progress_line.line(f"[{done}/{total}] {status} {outcome.input}")

    result = analyze_many(list(inputs), output, jobs=jobs, executor=executor, scheduler=scheduler,
                          overwrite=overwrite, machine=machine, aggregate=aggregate,
                          name_template=name_template, progress=progress)
    click.echo(result.summary())
    from nsroof.commands.hints import fold_metrics_hints

    hints = [h for o in result.outcomes if o.ok for h in o.hints]
    if output.is_dir():  # a local dataset folder: the metric list goes beside its parts (a "_" name: Parquet
        # readers skip it, as they skip the dataset summary)
        hints = fold_metrics_hints(hints, output / "_ncu-metrics.txt")
    for hint in hints:
        click.echo(f"hint: {hint}")
    if result.exit_code:
        raise SystemExit(result.exit_code)
