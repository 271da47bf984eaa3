"""The Python API behind `import nsroof`: the same jobs as the commands, on paths or reports.

One Report type (nsroof.pipeline.Report: `.frame`, `.metadata`, `.warnings`, `.hints`) comes from
`analyze()`, `load()` and `profile(...).report`; `summary()`, `plot()` and `html()` take a Report or
the path of a report (`.parquet` or a dataset folder). Errors a user can cause are one-line NsroofErrors
here too (a file that is not a report, a selection that keeps nothing), never a library's traceback.

`html()` is the `nsroof report` command's job: `nsroof.report` is the package of the report modules.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from nsroof.collectors.torch_profile import profile as _profile
from nsroof.pipeline import Report

if TYPE_CHECKING:  # pragma: no cover
    from matplotlib.figure import Figure

    from nsroof.report.selection import Selection

PathLike = str | os.PathLike[str]
ReportLike = Report | PathLike


def analyze(inputs: PathLike | list[PathLike], *, machine: str | None = None, aggregate: bool = False,
            ledger: PathLike | None = None, kernel: str | None = None, nvtx: str | None = None,
            step: str | int | None = None, device: str | None = None, source: str | None = None) -> Report:
    """Analyze Nsight Compute exports or torch.profiler traces (one path or several) into a Report, as
    `nsroof analyze` does; `kernel`/`nvtx`/`step`/`device`/`source` keep the matching kernels."""
    from nsroof.pipeline import analyze as run

    paths = [Path(p) for p in (inputs if isinstance(inputs, list) else [inputs])]
    report = run(paths, machine=machine, aggregate=aggregate, ledger=Path(ledger) if ledger else None)
    return _selected(report, _selection(kernel, nvtx, step, device, source), str(paths[0]))


def load(path: PathLike, *, filters: Any = None, columns: list[str] | None = None) -> Report:
    """A report file or dataset folder written by nsroof, as a Report (categorical dtypes; `filters` as
    pyarrow takes them, e.g. [("rank", "=", 0)]). Anything else is a one-line InputError."""
    from nsroof.report.load import load_report

    frame, metadata = load_report(path, filters=filters, columns=columns)
    return Report(frame, metadata)


class profile(_profile):  # noqa: N801  (used as `with nsroof.profile(...)`, like torch.profiler.profile)
    """nsroof.collectors.torch_profile.profile, whose `.report` is a Report (rows, metadata, warnings, and
    `.trace`: the chrome trace it saved, in a new temporary folder unless `trace=` named a path)."""

    @property
    def report(self) -> Report:  # type: ignore[override]
        frame = super().report
        result = self.result
        assert result is not None
        ops = result.ops if result.ops is not None else Report(frame).ops
        return Report(frame, dict(result.metadata), list(result.warnings), ops=ops, trace=result.trace)


def summary(report: ReportLike, *, top: int = 10, width: int | None = None) -> str:
    """The text `nsroof analyze` prints for a Report or a report file (lines fitted to `width`,
    default the terminal's)."""
    from nsroof.report.summary import render

    return render(_report(report), top=top, width=width)


def plot(report: ReportLike, output: PathLike | None = None, *, level: str = "all", top: int = 10,
         precision: str | None = None, title: str | None = None, size: tuple[float, float] | None = None,
         dpi: int | None = None, kernel: str | None = None, nvtx: str | None = None,
         step: str | int | None = None, device: str | None = None, source: str | None = None) -> Figure:
    """The roofline chart of a Report or a report file (as `nsroof plot`); saved to `output` (.png, .svg,
    .pdf) when given. Returns the matplotlib Figure."""
    from nsroof.report import plots

    frame = _selected(_report(report), _selection(kernel, nvtx, step, device, source), _name(report)).frame
    fig = plots.plot(frame, level=level, top=top, precision=precision, title=title, size=size)
    if output is not None:
        plots.save(fig, output, dpi=dpi)
    return fig


def html(report: ReportLike, output: PathLike, *, title: str = "nsroof report", top: int = 10,
         kernel: str | None = None, nvtx: str | None = None, step: str | int | None = None,
         device: str | None = None, source: str | None = None, rows: int | None = None) -> Path:
    """The self-contained HTML page of a Report or a report file (as `nsroof report`), written to `output`;
    `rows`: kernels its table lists, longest first (None: nsroof.report.html.MAX_TABLE_ROWS;
    0: every kernel)."""
    from nsroof.report import html as page

    chosen = _selected(_report(report), _selection(kernel, nvtx, step, device, source), _name(report))
    return page.write(chosen.frame, output, metadata=chosen.metadata, title=title, top=top, max_rows=rows)


def _report(report: ReportLike) -> Report:
    if isinstance(report, Report):
        return report
    if isinstance(report, (str, os.PathLike)):
        return load(report)
    from nsroof.errors import NsroofError

    raise NsroofError(f"expected a Report or the path of a report, not {type(report).__name__}")


def _name(report: ReportLike) -> str:
    return "the report" if isinstance(report, Report) else os.fspath(report)


def _selection(kernel: str | None, nvtx: str | None, step: str | int | None, device: str | None,
               source: str | None) -> Selection:
    from nsroof.report.selection import Selection

    return Selection(kernel=kernel, nvtx=nvtx, step=None if step is None else str(step), device=device,
                     source=source)


def _selected(report: Report, selection: Selection, what: str) -> Report:
    if not selection:
        return report
    frame = selection.apply(report.frame, what=what)
    return Report(frame, {**report.metadata, "selection": selection.describe()}, list(report.warnings),
                  list(report.hints))
