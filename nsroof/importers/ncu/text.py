"""Nsight Compute's text (non-CSV) output -> the normalized kernel table (nsroof.importers.kernel_table).

    ncu ./app > run.txt
    df = read("run.txt")       # same columns, units and facts as nsroof.importers.ncu.csv_export.read

What ncu prints without --csv (Nsight Compute CLI docs: console output, --print-nvtx-rename), one block
per launch:

    ==PROF== Connected to process 18548 (...)          ==PROF==/==WARNING==/==ERROR== lines, app output
    [18548] MC_EstimatePi.exe@127.0.0.1                process line
      initRNG(...) (156160, 1, 1)x(128, 1, 1), Context 1, Stream 7, Device 0, CC 8.6   kernel line, 2023+
      initRNG(...), 2020-Dec-03 17:12:24, Context 1, Stream 7                         <= 2022.3 (Kernel Time)
      void k<...>(...)                                                                2025.x: name, then
      (156160, 1, 1)x(128, 1, 1), Context 1, Stream 7, Device 0, CC 8.6              launch on the next line
        NVTX Start/End Ranges:          domains, then `<id,name>` lines (payload lines below them)
        NVTX Push/Pop Stack for Thread 21096:      domains, then `<level,name>`, bottom of the stack first
        Section: GPU Speed Of Light
        ---------------- ------------- ------------   the dashes give the column widths
        Metric Name        Metric Unit Metric Value   (header row: absent before ~2022)
        ---------------- ------------- ------------
        DRAM Frequency   cycle/nsecond         9.26   name left-aligned (may hold spaces), unit and
        ---------------- ------------- ------------   value right-aligned
        WRN   rule text ...                            rule results: skipped

The text carries no launch ID: launches are numbered 0, 1, ... in print order, which is ncu's ID order
(the N in `==PROF== Profiling "k" - N`). Everything after the lines is the CSV importer's: labels map to
metric names through nsroof.importers.ncu.section_labels, units through nsroof.units, the number style is
decided once per file by nsroof.importers.ncu.locale_numbers (instance values `agg (a; b)` keep `agg`), NVTX
ranges are ordered by nsroof.names.nvtx_paths.enclosing, short names come from nsroof.names.kernel_names.
"""

from __future__ import annotations

import gzip
import os
import re
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
from nsroof.importers.ncu.csv_bytes import EXPORT_HINT, Preamble, truncated
from nsroof.importers.ncu.section_labels import column_name, disambiguate, wrong_label_unit
from nsroof.importers.ncu.section_labels import is_read as label_is_read
from nsroof.names import kernel_names, nvtx_paths
from nsroof.schema import IDENTITY_COLUMNS, FileFacts
from nsroof.units import UnknownUnitError, scale

FORMAT_TEXT = "ncu-text:details"
RAW_EXPORT_COMMAND = "ncu -i REPORT.ncu-rep --csv --page raw --print-units base"
TEXT_HINT = ("profile with `ncu -o REPORT ...` and read `" + RAW_EXPORT_COMMAND + "` (every metric, full "
             "precision) instead of the console text")

_PROCESS = re.compile(r"^\[(?P<pid>\d+)\] (?P<rest>\S.*)$")
_DIMS = r"\((?P<grid>\d+, \d+, \d+)\)x\((?P<block>\d+, \d+, \d+)\)"
_TAIL = (r", Context (?P<context>\d+), Stream (?P<stream>\d+)"
         r"(?:, Device (?P<device>\d+), CC (?P<cc>\d+[.,]\d+))?\s*$")
_KERNEL_DIMS_ONLY = re.compile(r"^\s+" + _DIMS + _TAIL)  # 2025.x second line
_KERNEL = re.compile(r"^\s+(?P<name>\S.*?) " + _DIMS + _TAIL)
_KERNEL_TIME = re.compile(r"^\s+(?P<name>\S.*?)(?: " + _DIMS + r")?"
                          r", (?P<time>\d{4}-[A-Za-z]{3}-\d{1,2} \d{1,2}:\d{2}:\d{2})" + _TAIL)
_SECTION = re.compile(r"^\s+Section: (?P<name>.*\S)\s*$")
_RULE = re.compile(r"^\s*-+(?: +-+)*\s*$")
_NVTX_START_END = re.compile(r"^\s+NVTX Start/End Ranges:\s*$")
_NVTX_PUSH_POP = re.compile(r"^\s+NVTX Push/Pop Stack for Thread (?P<tid>\d+):\s*$")
_NVTX_RANGE = re.compile(r"^<(?P<id>\d+),(?P<name>.*)>$", re.DOTALL)
_RULE_RESULT = re.compile(r"^(?P<indent>\s+)(?:WRN|INF|OPT|ERR|ERROR|WARNING)\s+\S")
_FLAG = re.compile(r"^\(!\)\s*")  # ncu flags values it could not collect: `(!) n/a`


@dataclass
class _Launch:
    line: int
    process_id: int | None
    process_name: str
    host: str
    kernel_name: str
    grid: str
    block: str
    context: int
    stream: int
    device_id: int | None
    cc: str
    layout: str
    push_pop: list[nvtx_paths.NvtxRange] = field(default_factory=list)
    start_end: list[nvtx_paths.NvtxRange] = field(default_factory=list)


@dataclass
class _Rows:
    """One entry per printed metric row."""

    kernel: list[int] = field(default_factory=list)
    section: list[str] = field(default_factory=list)
    label: list[str] = field(default_factory=list)
    unit: list[str] = field(default_factory=list)
    value: list[str] = field(default_factory=list)
    line: list[int] = field(default_factory=list)


def read(path: str | os.PathLike[str]) -> tuple[pd.DataFrame, FileFacts]:
    """Read ncu's text output (details page, any version's layout) into the normalized kernel table
    and its file facts."""
    p = Path(path)
    parser = _Parser(p, _lines(p))
    parser.run()
    return parser.frame()


# ---------------------------------------------------------------------------------------------
# lines
# ---------------------------------------------------------------------------------------------


def _lines(p: Path) -> list[str]:
    if not p.exists():
        raise InputError(p, "no such file", hint="check the path")
    if p.is_dir():
        raise InputError(p, "is a directory, not ncu output", hint="pass the file ncu's output went to")
    try:
        with open(p, "rb") as fh:
            data = fh.read()
        if data[:2] == b"\x1f\x8b":
            data = gzip.decompress(data)
    except (OSError, EOFError) as exc:
        raise InputError(p, f"cannot read it ({exc})", hint="re-compress it or pass the plain file") from None
    if b"\0" in data[: 1 << 16]:
        raise InputError(p, "binary file, not ncu text output", line=1, hint=EXPORT_HINT)
    data = data.removeprefix(b"\xef\xbb\xbf")
    if data and not data.endswith(b"\n"):
        # ncu ends every line it prints: without the last newline the output was cut off, and a cut
        # after a table or inside a rule result's text would otherwise read as fewer kernels
        raise truncated(p, data.count(b"\n") + 1)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InputError(p, "not UTF-8 text", line=data[: exc.start].count(b"\n") + 1,
                         hint=EXPORT_HINT) from None
    return text.splitlines()


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip(" "))


def _spans(rule: str) -> list[tuple[int, int]]:
    return [(m.start(), m.end()) for m in re.finditer(r"-+", rule)]


def split_row(line: str, spans: list[tuple[int, int]]) -> list[str] | None:
    """The cells of one table row, cut at the column widths the dashed rule gives; None when the row
    does not fit them. A cell wider than its column pushes the rest of the row right (printf-style
    padding), so the cut moves with it; the last column runs to the end of the line. Only the name
    column is left-aligned and may hold spaces: a wide unit is one word."""
    if not spans or line[: spans[0][0]].strip():
        return None
    cells: list[str] = []
    shift = 0
    for k, (start, end) in enumerate(spans):
        start, end = start + shift, end + shift
        if start > 0 and start <= len(line) and line[start - 1] != " ":
            return None
        if k == len(spans) - 1:
            cells.append(line[start:].strip())
            break
        stop = end
        while stop < len(line) and line[stop] != " ":
            stop += 1
        if stop > end and (line[start] == " " or (k > 0 and " " in line[start:stop])):
            # padded, yet past its column; or, in a right-aligned column (unit), a short cell followed by
            # the next one moved into this column: misaligned, not wide
            return None
        shift += stop - end
        cells.append(line[start:stop].strip())
    return cells


# ---------------------------------------------------------------------------------------------
# parser
# ---------------------------------------------------------------------------------------------


class _Parser:
    def __init__(self, path: Path, lines: list[str]) -> None:
        self.path = path
        self.lines = lines
        self.launches: list[_Launch] = []
        self.rows = _Rows()
        self.messages: list[str] = []  # ==PROF==/==WARNING==/==ERROR== lines anywhere
        self.skipped: list[tuple[int, str]] = []  # lines after the first result that are none of ncu's
        # (metric, printed unit) dropped: no roofline number reads it
        self.ignored: list[tuple[str, str]] = []
        self.process: tuple[int | None, str, str] = (None, "", "")

    def error(self, cause: str, line: int, hint: str = EXPORT_HINT) -> InputError:
        return InputError(self.path, cause, line=line, hint=hint)

    def run(self) -> None:
        lines = self.lines
        n = len(lines)
        i = 0
        other: tuple[int, str] | None = None  # the previous non-blank line, when it was unclaimed
        while i < n:
            line = lines[i].rstrip()
            ln = i + 1
            i += 1
            if not line.strip():
                self._unclaimed(other)
                other = None
                continue
            if line.startswith("=="):
                self._unclaimed(other)
                other = None
                self.messages.append(line.strip())
                continue
            m = _PROCESS.match(line)
            if m and "@" in m.group("rest"):
                self._unclaimed(other)
                other = None
                name, _, host = m.group("rest").rpartition("@")
                self.process = (int(m.group("pid")), name, host.strip())
                continue
            if ", Context " in line:
                launch = self._kernel_line(line, ln, other)
                if launch is not None:
                    if launch.layout != "two-line":
                        self._unclaimed(other)
                    other = None
                    self.launches.append(launch)
                    continue
            if self.launches:
                j = self._kernel_part(line, ln, i)
                if j is not None:
                    self._unclaimed(other)
                    other = None
                    i = j
                    continue
            self._unclaimed(other)
            other = (ln, line)
        self._unclaimed(other)
        if not self.launches:
            raise self._no_results()

    def _unclaimed(self, other: tuple[int, str] | None) -> None:
        """A line that is none of ncu's: application output before the results is expected; after
        the first result it is counted in a warning."""
        if other is not None and self.launches:
            self.skipped.append(other)

    def _kernel_line(self, line: str, ln: int, other: tuple[int, str] | None) -> _Launch | None:
        m = _KERNEL_DIMS_ONLY.match(line)
        if m is not None:
            if other is None:
                raise self.error("a launch line `(grid)x(block), Context …` without the kernel name on the "
                                 "line before it", ln)
            name, layout, first = other[1].strip(), "two-line", other[0]
        else:
            m = _KERNEL.match(line)
            layout = "one-line"
            if m is None:
                m = _KERNEL_TIME.match(line)
                layout = "kernel-time"
            if m is None:
                return None
            name, first = m.group("name"), ln
        pid, pname, host = self.process
        device = m.group("device")
        return _Launch(
            line=first, process_id=pid, process_name=pname, host=host, kernel_name=name,
            grid=f"({m.group('grid')})" if m.group("grid") else "",
            block=f"({m.group('block')})" if m.group("block") else "",
            context=int(m.group("context")), stream=int(m.group("stream")),
            device_id=int(device) if device is not None else None,
            cc=(m.group("cc") or "").replace(",", "."), layout=layout,
        )

    def _kernel_part(self, line: str, ln: int, i: int) -> int | None:
        """A section table, NVTX block, rule result or separator of the current launch: returns the
        index of the line after it, or None when the line is none of these."""
        m = _SECTION.match(line)
        if m is not None:
            return self._table(m.group("name"), ln, i)
        if _NVTX_START_END.match(line):
            return self._nvtx(line, i, "start_end")
        if _NVTX_PUSH_POP.match(line):
            return self._nvtx(line, i, "push_pop")
        m = _RULE_RESULT.match(line)
        if m is not None:
            return self._skip_deeper(len(m.group("indent")), i)
        if _RULE.match(line):
            head = self.lines[i] if i < len(self.lines) else ""
            if "Metric Name" in head and "Metric Value" in head:  # a table without a `Section:` line
                return self._table("", ln, i - 1)
            return i  # `----- ------` between two rule results
        return None

    def _skip_deeper(self, indent: int, i: int) -> int:
        while i < len(self.lines):
            nxt = self.lines[i].rstrip()
            if not nxt.strip() or _indent(nxt) <= indent:
                break
            i += 1
        return i

    def _table(self, section: str, section_line: int, i: int) -> int:
        lines = self.lines
        n = len(lines)
        j = i
        while j < n and not lines[j].strip():
            j += 1
        if j >= n or not _RULE.match(lines[j]):
            return i  # a section that printed no table (only rule results or charts)
        spans = _spans(lines[j].rstrip())
        what = (f"section {section!r} (line {section_line})" if section
                else f"the table at line {section_line}")
        j += 1
        columns = {"Metric Name": 0, "Metric Unit": 1, "Metric Value": 2}
        head = lines[j].rstrip() if j < n else ""
        if "Metric Name" in head and "Metric Value" in head:
            cells = split_row(head, spans)
            if cells is None or "Metric Name" not in cells or "Metric Value" not in cells:
                raise self.error(f"header row of {what} does not fit its dashed rule", j + 1)
            columns = {c: cells.index(c) for c in ("Metric Name", "Metric Unit", "Metric Value")
                       if c in cells}
            j += 1
            if j >= n or not _RULE.match(lines[j]):
                raise self.error(f"header row of {what} is not followed by a dashed rule",
                                 min(j + 1, n))
            j += 1
        elif len(spans) != 3:
            raise self.error(f"{what} has {len(spans)} columns and no header row; "
                             "expected Metric Name, Metric Unit, Metric Value", j)
        kernel = len(self.launches) - 1
        name_at, value_at, unit_at = (columns["Metric Name"], columns["Metric Value"],
                                      columns.get("Metric Unit"))
        while True:
            if j >= n:
                raise self.error(f"{what}: the table ends without its closing rule: "
                                 "the output is truncated", n, hint="rerun ncu and keep its whole output")
            row = lines[j].rstrip()
            j += 1
            if not row.strip():
                raise self.error(f"{what}: blank line inside the table: "
                                 "the output is damaged or truncated", j,
                                 hint="rerun ncu and keep its whole output")
            if _RULE.match(row):
                return j
            cells = split_row(row, spans)
            if cells is None or not cells[name_at]:
                raise self.error(f"{what}: row does not fit the table's columns", j,
                                 hint="the output is damaged; rerun ncu and keep its whole output")
            rows = self.rows
            rows.kernel.append(kernel)
            rows.section.append(section)
            rows.label.append(cells[name_at])
            rows.unit.append(cells[unit_at] if unit_at is not None else "")
            rows.value.append(_FLAG.sub("", cells[value_at]))
            rows.line.append(j)

    def _nvtx(self, heading: str, i: int, kind: str) -> int:
        """Domains one level below the heading, ranges `<id,name>` below a domain, payload lines
        (`Int64: 42`, `ASCII: layer1`) below a range."""
        launch = self.launches[-1]
        found = launch.start_end if kind == "start_end" else launch.push_pop
        base = _indent(heading)
        domain: str | None = None
        domain_indent = range_indent = -1
        lines = self.lines
        while i < len(lines):
            line = lines[i].rstrip()
            ind = _indent(line)
            if not line.strip() or ind <= base:
                break
            text = line.strip()
            m = _NVTX_RANGE.match(text)
            if domain is None or ind <= domain_indent:
                domain, domain_indent, range_indent = text, ind, -1
            elif m is not None and (range_indent < 0 or ind <= range_indent):
                range_indent = ind
                found.append(nvtx_paths.NvtxRange(domain, m.group("name"), kind))
            i += 1
        return i

    def _no_results(self) -> InputError:
        lines = self.lines
        content = [(k, ln) for k, ln in enumerate(lines, 1) if ln.strip()]
        if not content:
            return InputError(self.path, "file is empty", line=1, hint="rerun ncu and keep its output")
        errors = [(k, ln.strip()) for k, ln in content if ln.startswith("==ERROR==")]
        if errors and all(ln.startswith("==") for _, ln in content):
            return InputError(self.path, f"holds only ncu messages, no results: {errors[0][1]}",
                              line=errors[0][0],
                              hint="ncu failed before profiling; fix what it reports and rerun")
        return InputError(self.path,
                          "no kernel results: no `  name (grid)x(block), Context N, Stream N` line",
                          line=content[0][0],
                          hint="ncu profiled no kernel (check -k / --launch-count), "
                               "or this is not ncu output")

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
        facts = FileFacts(format=FORMAT_TEXT, source=self.path.name, layout="+".join(layouts),
                          metric_units=units, number_style=style.style,
                          number_style_evidence=style.evidence, warnings=warnings, hints=hints)
        return frame, facts

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
