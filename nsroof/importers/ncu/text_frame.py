"""Nsight Compute's text output, second half: the kernel table and file facts from what the line scan of
nsroof.importers.ncu.text collected (launches, metric rows, messages). Labels map to metric names through
nsroof.importers.ncu.section_labels, units through nsroof.units, the number style is decided once per file
by nsroof.importers.ncu.locale_numbers; a per-kernel summary's rows carry their launches and say they are
averages.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa

from nsroof.counters import dimensions
from nsroof.counters.metric_formulas import lacking_roofline_counters
from nsroof.errors import InputError, UnitError
from nsroof.importers.kernel_table import assemble, fill_launch_identity
from nsroof.importers.ncu import locale_numbers as numbers
from nsroof.importers.ncu.csv_bytes import Preamble
from nsroof.importers.ncu.section_labels import column_name, disambiguate, wrong_label_unit
from nsroof.importers.ncu.section_labels import is_read as label_is_read
from nsroof.names import kernel_names, nvtx_paths
from nsroof.schema import IDENTITY_COLUMNS, FileFacts
from nsroof.units import UnknownUnitError, scale

FORMAT_TEXT = "ncu-text:details"
FORMAT_SUMMARY = "ncu-text:per-kernel-summary"
RAW_EXPORT_COMMAND = "ncu -i REPORT.ncu-rep --csv --page raw --print-units base"
TEXT_HINT = ("profile with `ncu -o REPORT ...` and read `" + RAW_EXPORT_COMMAND + "` (every metric, full "
             "precision) instead of the console text")


@dataclass
class Launch:
    line: int
    process_id: int | None
    process_name: str
    host: str
    kernel_name: str
    grid: str
    block: str
    context: int | None
    stream: int | None
    device_id: int | None
    cc: str
    layout: str
    invocations: int | None = None  # a --print-summary per-kernel block: the launches its averages are over
    push_pop: list[nvtx_paths.NvtxRange] = field(default_factory=list)
    start_end: list[nvtx_paths.NvtxRange] = field(default_factory=list)


@dataclass
class Rows:
    """One entry per printed metric row."""

    kernel: list[int] = field(default_factory=list)
    section: list[str] = field(default_factory=list)
    label: list[str] = field(default_factory=list)
    unit: list[str] = field(default_factory=list)
    value: list[str] = field(default_factory=list)
    line: list[int] = field(default_factory=list)

    def add(self, kernel: int, section: str, label: str, unit: str, value: str, line: int) -> None:
        self.kernel.append(kernel)
        self.section.append(section)
        self.label.append(label)
        self.unit.append(unit)
        self.value.append(value)
        self.line.append(line)


class FrameBuilder:
    """The table half of the text importer's parser (nsroof.importers.ncu.text._Parser), which fills these."""

    path: Path
    launches: list[Launch]
    rows: Rows
    messages: list[str]
    skipped: list[tuple[int, str]]  # lines after the first result that are none of ncu's
    ignored: list[tuple[str, str]]  # (metric, printed unit) dropped: no roofline number reads it

    # -----------------------------------------------------------------------------------------
    # table
    # -----------------------------------------------------------------------------------------

    def frame(self) -> tuple[pd.DataFrame, FileFacts]:
        warnings: list[str] = []
        hints: list[str] = []
        identity = self._identity()
        columns, units, style = self._metrics(len(identity))
        frame = assemble(identity, columns)
        fill_launch_identity(frame)
        self._summary_columns(frame, warnings)
        pre = Preamble(self.messages)
        for msg in pre.messages("==ERROR==")[:3] + pre.messages("==WARNING==")[:3]:
            warnings.append(f"ncu said: {msg}")
        if self.skipped:
            line, first = self.skipped[0]
            warnings.append(f"skipped {len(self.skipped)} line(s) among the results that are not ncu's "
                            f"(first at line {line}: {first.strip()[:80]!r})")
        if style.evidence.startswith("ambiguous"):
            warnings.append(f"number style {style.style}: {style.evidence}")
        ignored = dimensions.ignored_warning(self.ignored)
        if ignored is not None:
            warnings.append(ignored)
        lacking = lacking_roofline_counters(frame.columns)
        if lacking:
            hints.append("ncu's text output shows section labels rounded to 2 decimals, and no "
                         f"{' or '.join(lacking)} counters here; " + TEXT_HINT)
        layouts = list(dict.fromkeys(launch.layout for launch in self.launches))
        summary = any(launch.invocations is not None for launch in self.launches)
        facts = FileFacts(format=FORMAT_SUMMARY if summary else FORMAT_TEXT, source=self.path.name,
                          layout="+".join(layouts),
                          metric_units=units, number_style=style.style,
                          number_style_evidence=style.evidence, warnings=warnings, hints=hints)
        return frame, facts

    def _summary_columns(self, frame: pd.DataFrame, warnings: list[str]) -> None:
        """A --print-summary per-kernel row stands for its Invocations (launches) and holds their averages
        (value_basis, which every quantity's provenance repeats); the warning says what that means."""
        counts = [k.invocations for k in self.launches]
        if all(c is None for c in counts):
            return
        frame["launches"] = pd.array([c or 1 for c in counts], dtype="Int64")
        frame["value_basis"] = pd.Series(
            ["" if c is None else f"average over {c} invocation{'s' * (c != 1)}: "
             "ncu --print-summary per-kernel" for c in counts], index=frame.index, dtype=object)
        total = sum(c or 1 for c in counts)
        warnings.append(f"ncu's per-kernel summary: each of the {len(counts)} row(s) holds the average "
                        f"launch of its kernel over its invocations ({total} launches in all, the rows' "
                        "`launches`); durations, bytes and FLOPs are per launch, so time shares weigh each "
                        "kernel by one launch; profile without --print-summary for every launch")

    def _identity(self) -> pd.DataFrame:
        launches = self.launches
        n = len(launches)
        ranges = [list(nvtx_paths.enclosing(k.push_pop, k.start_end)) for k in launches]
        cols: dict[str, Any] = {
            "source": [self.path.name] * n,
            "kernel_id": np.arange(n, dtype=np.int64),
            "process_id": pd.array([k.process_id for k in launches], dtype="Int64"),
            "process_name": [k.process_name for k in launches],
            "host": [k.host for k in launches],
            "device": [""] * n,  # text output names the device only by index
            "device_id": pd.array([k.device_id for k in launches], dtype="Int64"),
            "cc": [k.cc for k in launches],
            "kernel_name": [k.kernel_name for k in launches],
            "function": [kernel_names.short_name(k.kernel_name) for k in launches],
            "grid": [k.grid for k in launches],
            "block": [k.block for k in launches],
            "context": pd.array([k.context for k in launches], dtype="Int64"),
            "stream": pd.array([k.stream for k in launches], dtype="Int64"),
            "nvtx_ranges": ranges,
            "nvtx_path": [nvtx_paths.path(r) for r in ranges],
        }
        assert list(cols) == list(IDENTITY_COLUMNS)
        frame = pd.DataFrame(cols)
        for name, (dtype, _) in IDENTITY_COLUMNS.items():
            if dtype == "object" and frame[name].dtype != object:
                frame[name] = frame[name].astype(object)  # the kernel-table contract: plain Python strings
        return frame

    def _metrics(self, n_kernels: int) -> tuple[dict[str, np.ndarray], dict[str, str], numbers.StyleDecision]:
        rows = self.rows
        if not rows.value:
            return {}, {}, numbers.StyleDecision("C", "no numbers")
        n_rows = len(rows.value)
        line = np.asarray(rows.line, dtype=np.int64)

        # units: one scale per distinct unit string (None: a unit nsroof does not know)
        factor_of: dict[str, tuple[float, str] | None] = {}
        for unit in rows.unit:
            if unit not in factor_of:
                try:
                    factor_of[unit] = tuple(scale(unit))  # type: ignore[assignment]
                except UnknownUnitError:
                    factor_of[unit] = None
        # columns: one per (name, base unit), in order of first appearance; rows of a metric no roofline
        # number reads, in a unit nsroof cannot use, go to a scratch column (-1) and are dropped
        col_of: dict[tuple[str, str, str], tuple[int, bool]] = {}
        col_index: dict[tuple[str, str], int] = {}
        col_names: list[str] = []
        col_units: list[str] = []
        col = np.empty(n_rows, np.int64)
        explicit = np.empty(n_rows, bool)
        factor = np.empty(n_rows, np.float64)
        misfit = np.full(n_rows, -1, np.int64)  # index into misfits, for rows in the scratch column
        misfits: list[tuple[bool, str, str, str]] = []  # (refuse, column name, printed unit, why)
        for r in range(n_rows):
            f, base = factor_of[rows.unit[r]] or (1.0, "\0unknown")
            key = (rows.section[r], rows.label[r], base)
            got = col_of.get(key)
            if got is None:
                got = col_of[key] = self._column(r, base, col_index, col_names, col_units, misfits)
            col[r], explicit[r] = got
            if got[0] < 0:
                misfit[r] = -got[0] - 1
            factor[r] = f
        col_names = disambiguate(col_names, col_units)
        col[col < 0] = len(col_names)  # the scratch column, past the real ones

        cleaned = numbers.cells(pa.array(rows.value, type=pa.string()))
        style = numbers.decide_style(cleaned)
        if style.conflict is not None:
            a, b = style.conflict
            raise InputError(
                self.path,
                f"numbers mix styles: {rows.value[a]!r} (line {int(line[a])}) is en_US/C but "
                f"{rows.value[b]!r} is de_DE",
                line=int(line[b]),
                hint="rerun ncu with LC_ALL=C so every number has one format",
            )
        parsed = numbers.parse(cleaned, style.style)
        self._check_misfits(misfit, misfits, parsed, line)
        kidx = np.asarray(rows.kernel, dtype=np.int64)
        n_cols = len(col_names) + 1
        has_number = np.bincount(col[parsed.numeric], minlength=n_cols) > 0
        has_string = np.bincount(col[~parsed.numeric & ~parsed.missing], minlength=n_cols) > 0
        string_col = has_string & ~has_number

        # Which row wins when two print the same column for one launch: a printed metric name over a
        # mapped label, then the first printed (numpy keeps the last of repeated writes: order them so).
        num = np.flatnonzero(parsed.numeric)
        num = np.concatenate([num[~explicit[num]][::-1], num[explicit[num]][::-1]])
        out = np.full((n_kernels, n_cols), np.nan, dtype=np.float64)
        out[kidx[num], col[num]] = parsed.values[num] * factor[num]
        result: dict[str, np.ndarray] = {}
        for j, name in enumerate(col_names):
            if string_col[j]:
                strs = np.full(n_kernels, "", dtype=object)
                for r in np.flatnonzero((col == j) & ~parsed.missing)[::-1].tolist():
                    strs[kidx[r]] = str(parsed.strings[r].as_py())
                result[name] = strs
            else:
                result[name] = out[:, j]
        return result, dict(zip(col_names, col_units, strict=True)), style

    def _column(self, r: int, base: str, col_index: dict[tuple[str, str], int], col_names: list[str],
                col_units: list[str], misfits: list[tuple[bool, str, str, str]]) -> tuple[int, bool]:
        """The column of row r's (section, label, base unit), added on first sight; for a unit nsroof
        cannot use, (-1 - k, False) with misfits[k] saying whether a number in it refuses the file (a
        metric a roofline number reads) or drops the metric (any other)."""
        rows = self.rows
        section, label, unit = rows.section[r], rows.label[r], rows.unit[r]
        if base == "\0unknown":
            name = column_name(section, "", label, "")[0]
            misfits.append((label_is_read(section, "", label, name), name, unit,
                            f"unknown unit {unit!r} of {label!r}"))
            return -len(misfits), False
        name, is_name = column_name(section, "", label, base)
        wrong = dimensions.check(name, base) or (None if is_name
                                                 else wrong_label_unit(section, "", label, base))
        if wrong is not None:
            misfits.append((label_is_read(section, "", label, name), name, unit,
                            f"unit {unit!r} of the wrong dimension: {wrong}"))
            return -len(misfits), False
        j = col_index.get((name, base))
        if j is None:
            j = col_index[(name, base)] = len(col_names)
            col_names.append(name)
            col_units.append(base)
        return j, is_name

    def _check_misfits(self, misfit: np.ndarray, misfits: list[tuple[bool, str, str, str]], parsed: Any,
                       line: np.ndarray) -> None:
        """Refuse a number printed in a unit nsroof cannot use for a metric a roofline number reads (a
        failed launch's `n/a` without unit is no number); note the other metrics that lost a value."""
        for k, (refuse, name, unit, why) in enumerate(misfits):
            rows_k = misfit == k
            if refuse:
                printed = np.flatnonzero(rows_k & parsed.numeric)
                if printed.size:
                    hint = ("nsroof knows ncu's units (byte…Tbyte, ns/nsecond…second, hz…Ghz, cycle/nsecond, "
                            "inst, sector, %, …)" if why.startswith("unknown") else
                            "the output is damaged or edited; profile again")
                    raise UnitError(self.path, why, line=int(line[printed[0]]), hint=hint)
            elif (rows_k & ~parsed.missing).any():
                self.ignored.append((name, unit))
