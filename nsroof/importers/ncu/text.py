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

`--print-summary per-kernel` prints one block per kernel name and shape instead (`  name (grid)x(block),
Device 0, CC 7.5, Invocations 3`, tables of Minimum / Maximum / Average): one row each, its Average values,
`launches` = the Invocations (text_frame). `--page raw` tables (per launch or summary) put their header above
one dashed rule, name metrics, and end at a blank line.

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
from pathlib import Path

import pandas as pd

from nsroof.errors import InputError
from nsroof.importers.ncu.csv_bytes import EXPORT_HINT, truncated
from nsroof.importers.ncu.text_frame import FORMAT_SUMMARY as FORMAT_SUMMARY
from nsroof.importers.ncu.text_frame import FORMAT_TEXT as FORMAT_TEXT
from nsroof.importers.ncu.text_frame import TEXT_HINT as TEXT_HINT
from nsroof.importers.ncu.text_frame import FrameBuilder, Launch, Rows
from nsroof.names import nvtx_paths
from nsroof.schema import FileFacts

_PROCESS = re.compile(r"^\[(?P<pid>\d+)\] (?P<rest>\S.*)$")
_DIMS = r"\((?P<grid>\d+, \d+, \d+)\)x\((?P<block>\d+, \d+, \d+)\)"
_TAIL = (r", Context (?P<context>\d+), Stream (?P<stream>\d+)"
         r"(?:, Device (?P<device>\d+), CC (?P<cc>\d+[.,]\d+))?\s*$")
_KERNEL_DIMS_ONLY = re.compile(r"^\s+" + _DIMS + _TAIL)  # 2025.x second line
# --print-summary per-kernel: one block per kernel name and launch shape, its metrics' Minimum, Maximum and
# Average over the launches (`Invocations N`); ncu 2024.1:
#   `  actualizar_simulacion(...) (2, 16, 1)x(32, 4, 1), Device 0, CC 7.5, Invocations 1`
_SUMMARY_TAIL = (r", Device (?P<device>\d+)(?:, CC (?P<cc>\d+[.,]\d+))?"
                 r", Invocations (?P<invocations>\d+)\s*$")
_SUMMARY_DIMS_ONLY = re.compile(r"^\s+" + _DIMS + _SUMMARY_TAIL)  # a name line before it, as 2025.x
_SUMMARY = re.compile(r"^\s+(?P<name>\S.*?)(?: " + _DIMS + r")?" + _SUMMARY_TAIL)
# the summary's closing note ("The shown averages are calculated as the arithmetic mean …")
_NOTE = re.compile(r"^\s+Note: ")
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


# the value column of a table: Metric Value, or a summary's Average (its Minimum and Maximum are not read)
VALUE_COLUMNS: tuple[str, ...] = ("Metric Value", "Average")


def _is_header(line: str) -> bool:
    return "Metric Name" in line and any(c in line for c in VALUE_COLUMNS)


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


class _Parser(FrameBuilder):
    def __init__(self, path: Path, lines: list[str]) -> None:
        self.path = path
        self.lines = lines
        self.launches: list[Launch] = []
        self.rows = Rows()
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
            if ", Context " in line or ", Invocations " in line:
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

    def _kernel_line(self, line: str, ln: int, other: tuple[int, str] | None) -> Launch | None:
        if ", Invocations " in line:
            return self._summary_line(line, ln, other)
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
        return Launch(
            line=first, process_id=pid, process_name=pname, host=host, kernel_name=name,
            grid=f"({m.group('grid')})" if m.group("grid") else "",
            block=f"({m.group('block')})" if m.group("block") else "",
            context=int(m.group("context")), stream=int(m.group("stream")),
            device_id=int(device) if device is not None else None,
            cc=(m.group("cc") or "").replace(",", "."), layout=layout,
        )

    def _summary_line(self, line: str, ln: int, other: tuple[int, str] | None) -> Launch | None:
        """A --print-summary per-kernel block's kernel line: no launch ID, context or stream, and the
        number of launches its values average."""
        m = _SUMMARY_DIMS_ONLY.match(line)
        if m is not None:
            if other is None:
                raise self.error("a summary line `(grid)x(block), Device N, …, Invocations N` without the "
                                 "kernel name on the line before it", ln)
            name, layout, first = other[1].strip(), "summary-two-line", other[0]
        else:
            m = _SUMMARY.match(line)
            if m is None:
                return None
            name, layout, first = m.group("name"), "summary", ln
        pid, pname, host = self.process
        return Launch(
            line=first, process_id=pid, process_name=pname, host=host, kernel_name=name,
            grid=f"({m.group('grid')})" if m.group("grid") else "",
            block=f"({m.group('block')})" if m.group("block") else "",
            context=None, stream=None, device_id=int(m.group("device")),
            cc=(m.group("cc") or "").replace(",", "."), layout=layout,
            invocations=int(m.group("invocations")),
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
        nxt = self.lines[i] if i < len(self.lines) else ""
        if _is_header(line) and _RULE.match(nxt) and not _is_header(self.lines[i - 2] if i >= 2 else ""):
            return self._raw_table(line, i)
        if _NOTE.match(line):  # the summary's closing note, up to the blank line after it
            while i < len(self.lines) and self.lines[i].strip():
                i += 1
            return i
        if _RULE.match(line):
            head = self.lines[i] if i < len(self.lines) else ""
            if _is_header(head):  # a table without a `Section:` line
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
        if _is_header(head):
            cells = split_row(head, spans)
            value = next((c for c in VALUE_COLUMNS if cells is not None and c in cells), "")
            if cells is None or "Metric Name" not in cells or not value:
                raise self.error(f"header row of {what} does not fit its dashed rule", j + 1)
            columns = {c: cells.index(c) for c in ("Metric Name", "Metric Unit") if c in cells}
            columns["Metric Value"] = cells.index(value)
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
            self.rows.add(kernel, section, cells[name_at], cells[unit_at] if unit_at is not None else "",
                          _FLAG.sub("", cells[value_at]), j)

    def _raw_table(self, header: str, i: int) -> int:
        """The raw page's table (`--page raw`, per launch or `--print-summary per-kernel`): the header row
        above its one dashed rule, metric names in the first column, rows up to a blank line. A string value
        too long for its column goes on under it, alone in that column (`NVIDIA` / `A100-SXM4-40GB`)."""
        lines = self.lines
        spans = _spans(lines[i].rstrip())
        cells = split_row(header, spans)
        value = next((c for c in VALUE_COLUMNS if cells is not None and c in cells), "")
        if cells is None or "Metric Name" not in cells or not value:
            raise self.error("the raw page's header row does not fit its dashed rule", i)
        name_at, value_at = cells.index("Metric Name"), cells.index(value)
        unit_at = cells.index("Metric Unit") if "Metric Unit" in cells else None
        rows, kernel, j = self.rows, len(self.launches) - 1, i + 1
        while j < len(lines) and lines[j].strip():
            row = lines[j].rstrip()
            j += 1
            cells = split_row(row, spans)
            if cells is not None and not any(cells[:value_at]) and rows.kernel and rows.kernel[-1] == kernel:
                rows.value[-1] += " " + cells[value_at]  # the wrapped rest of the string above
                continue
            if cells is None or not cells[name_at]:
                raise self.error("a row of the raw page does not fit its columns", j,
                                 hint="the output is damaged; rerun ncu and keep its whole output")
            rows.add(kernel, "", cells[name_at], cells[unit_at] if unit_at is not None else "",
                     _FLAG.sub("", cells[value_at]), j)
        return j

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
