"""Byte-level reading of ncu CSV exports: gzip, BOM, preamble, row-aligned blocks, ragged-row padding.

Streaming keeps peak memory near one block (plus the compact columns the importer keeps), whatever
the file size. Blocks end on a row boundary: a newline with an even number of quotes before it (a
quoted field may hold a newline; doubled quotes `""` keep the count even).
"""

from __future__ import annotations

import csv
import gzip
import io
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO

from nsroof.errors import InputError

BLOCK_BYTES = 16 << 20
_HEADER = re.compile(rb'(?m)^"ID",')
_BOM = b"\xef\xbb\xbf"
# The longest cells of real exports are templated kernel names and NVTX stacks: tens of KB. The csv
# module's default limit (128 KiB) is near that; 16 MiB is far beyond any real cell and still bounds the
# work one cell can ask for. Longer cells are refused with their line.
MAX_FIELD_BYTES = 16 << 20
csv.field_size_limit(max(csv.field_size_limit(), MAX_FIELD_BYTES))
EXPORT_HINT = "export it with `ncu -i REPORT.ncu-rep --csv --page raw --print-units base > export.csv`"
TRUNCATED_HINT = "the file was cut off (an interrupted ncu run, copy or download): produce it again in full"


@dataclass
class Preamble:
    """What came before the header: ncu's own lines and application output."""

    lines: list[str] = field(default_factory=list)

    def messages(self, tag: str) -> list[str]:
        return [ln.strip() for ln in self.lines if ln.lstrip().startswith(tag)]


@dataclass
class Export:
    path: Path
    header: list[str]
    header_line: int  # 1-based line number of the header
    header_offset: int  # byte offset of the header in the (decompressed) file
    data_offset: int  # byte offset of the first row after the header
    newline: bytes  # b"\n" or b"\r\n", as the header line ends
    gzipped: bool
    preamble: Preamble
    stream: BinaryIO
    first: bytes  # bytes after the header line, already read

    def blocks(self, block_bytes: int | None = None) -> Iterator[tuple[int, memoryview]]:
        """(first line number, bytes) blocks of whole rows after the header, in file order (views: no
        copy). Each call reads the file afresh, so several readers can try in turn."""
        block_bytes = block_bytes or BLOCK_BYTES
        line = self.header_line + 1
        stream = _open(self.path)
        try:
            stream.seek(self.data_offset)
            carry = b""
            while True:
                more = stream.read(block_bytes)
                if not more:
                    if carry.strip():
                        if not carry.endswith(b"\n"):
                            carry += b"\n"
                        yield line, memoryview(carry)
                    return
                buf = carry + more if carry else more
                cut = _row_boundary(buf)
                if cut < 0:  # one row longer than a block: read on, up to the longest cell there can be
                    if len(buf) > block_bytes + MAX_FIELD_BYTES:
                        raise InputError(self.path, "a quoted cell runs on for more than "
                                         f"{MAX_FIELD_BYTES:,} bytes (an unbalanced quote, or the file is "
                                         "damaged)", line=line, hint=EXPORT_HINT)
                    carry = buf
                    continue
                view = memoryview(buf)[: cut + 1]
                n_lines = buf.count(b"\n", 0, cut + 1)
                if buf.strip(b" \t\r\n")[:1]:
                    yield line, view
                line += n_lines
                carry = buf[cut + 1 :]
        finally:
            stream.close()

    def check_complete(self) -> None:
        """InputError naming the last line when the (decompressed) file does not end in a newline.

        ncu ends every line it writes, so a last line without one was cut off, wherever the cut fell:
        inside a quoted cell, or after a closing quote, where every cell left still parses. Checked
        before any reader runs, so all of them refuse the same file with the same error. A plain
        file costs one seek; a gzip file one decompressing pass (the format has no way to its end)."""
        if self.gzipped:
            last = b""
            stream = _open(self.path)
            try:
                while chunk := stream.read(1 << 20):
                    last = chunk[-1:]
            except (OSError, EOFError) as exc:
                raise InputError(self.path, f"damaged gzip file ({exc})",
                                 hint="re-compress it or pass the plain file") from None
            finally:
                stream.close()
        else:
            with open(self.path, "rb") as fh:
                size = fh.seek(0, os.SEEK_END)
                fh.seek(max(size - 1, 0))
                last = fh.read(1)
        if last in (b"", b"\n"):
            return
        raise truncated(self.path, _count_newlines(self.path) + 1)

    def reopen(self) -> BinaryIO:
        """A fresh stream positioned at the header (the export's own stream stays where it is)."""
        stream = _open(self.path)
        stream.seek(self.header_offset)
        return stream

    def close(self) -> None:
        self.stream.close()


def truncated(path: str | os.PathLike[str], last_line: int) -> InputError:
    """The one error for a file cut off inside its last line (CSV and text output alike)."""
    return InputError(path, "truncated: the last line ends without a newline", line=last_line,
                      hint=TRUNCATED_HINT)


def _count_newlines(path: Path) -> int:
    """Newlines in the (decompressed) file; for the error path only."""
    stream = _open(path)
    n = 0
    try:
        while chunk := stream.read(1 << 22):
            n += chunk.count(b"\n")
    finally:
        stream.close()
    return n


def _row_boundary(buf: bytes) -> int:
    """Index of the last newline in buf that ends a row (even quote count before it), or -1."""
    end = len(buf)
    cut = buf.rfind(b"\n", 0, end)
    quotes = buf.count(b'"', 0, cut) if cut >= 0 else 0  # counted once, then walked back: linear time
    while cut >= 0:
        if quotes % 2 == 0:
            return cut
        prev = buf.rfind(b"\n", 0, cut)
        quotes -= buf.count(b'"', max(prev, 0), cut)
        cut = prev
    return -1


def _open(path: Path) -> BinaryIO:
    with open(path, "rb") as fh:
        magic = fh.read(2)
    if magic == b"\x1f\x8b":
        return gzip.open(path, "rb")  # type: ignore[return-value]
    return open(path, "rb")


def open_export(path: str | os.PathLike[str]) -> Export:
    """Open an ncu CSV export and find its header; InputError when it is none."""
    p = Path(path)
    if not p.exists():
        raise InputError(p, "no such file", hint="check the path")
    if p.is_dir():
        raise InputError(p, "is a directory, not an export", hint="pass an ncu CSV export file")
    stream = _open(p)
    try:
        buf = b""
        bom = 0
        found = None
        while found is None:
            try:
                more = stream.read(1 << 20)
            except (OSError, EOFError) as exc:
                raise InputError(p, f"damaged gzip file ({exc})",
                                 hint="re-compress it or pass the plain file") from None
            if not more:
                break
            buf += more
            if not bom and buf.startswith(_BOM):
                buf = buf[len(_BOM) :]
                bom = len(_BOM)
            if b"\0" in buf[: 1 << 16]:
                raise InputError(p, "binary file, not a CSV export", line=1, hint=EXPORT_HINT)
            found = _HEADER.search(buf)
            if found is None and len(buf) > (64 << 20):
                break
        if found is None:
            stream.close()
            raise _not_an_export(p, buf)
        start = found.start()
        eol = buf.find(b"\n", start)
        while eol < 0:
            more = stream.read(1 << 20)
            if not more:
                eol = len(buf)
                break
            buf += more
            eol = buf.find(b"\n", start)
        header_bytes = buf[start:eol].rstrip(b"\r")
        pre_text = _decode(p, buf[:start])
        header_line = pre_text.count("\n") + 1
        try:
            header = next(csv.reader([_decode(p, header_bytes)], strict=True))
        except csv.Error as exc:
            raise InputError(p, f"the header is not one CSV row ({exc})", line=header_line,
                             hint=EXPORT_HINT) from None
        return Export(
            path=p,
            header=header,
            header_line=header_line,
            header_offset=bom + start,
            data_offset=bom + eol + 1,
            newline=b"\r\n" if buf[start:eol].endswith(b"\r") else b"\n",
            gzipped=isinstance(stream, gzip.GzipFile),
            preamble=Preamble(pre_text.splitlines()),
            stream=stream,
            first=buf[eol + 1 :],
        )
    except BaseException:
        stream.close()
        raise


def _decode(p: Path, data: bytes) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise InputError(p, "not UTF-8 text", line=line, hint=EXPORT_HINT) from None


def _not_an_export(p: Path, buf: bytes) -> InputError:
    text = buf.decode("utf-8", errors="replace")
    lines = text.splitlines()
    if not text.strip():
        return InputError(p, "file is empty", line=1, hint=EXPORT_HINT)
    errors = [ln.strip() for ln in lines if ln.startswith("==ERROR==")]
    content = [ln for ln in lines if ln.strip()]
    if errors and all(ln.startswith("==") for ln in content):
        first = next(i for i, ln in enumerate(lines, 1) if ln.startswith("==ERROR=="))
        return InputError(
            p,
            f"holds only ncu messages, no CSV: {errors[0]}",
            line=first,
            hint="ncu failed before writing results; fix the ncu command it reports, then re-export",
        )
    first_line = next((i for i, ln in enumerate(lines, 1) if ln.strip()), 1)
    head = lines[first_line - 1] if lines else ""
    if (head.startswith('"Device","Kernel","Invocations"')
            or head.startswith("==") and "nvprof" in text[:2000].lower()):
        return InputError(p, "an nvprof export, not Nsight Compute", line=first_line,
                          hint="profile with ncu, then " + EXPORT_HINT)
    return InputError(
        p,
        'no Nsight Compute CSV header (a line starting with "ID",) found',
        line=first_line,
        hint=EXPORT_HINT,
    )


def ragged_width(block: bytes | memoryview) -> int | None:
    """Field count of the first row that ends in a trailing comma, or None when there is none.

    ncu's details page stops metric rows after `Metric Value` with a trailing comma; only rule rows
    are as wide as the header."""
    for m in re.finditer(rb"(?m)^.*,\r?$", bytes(block[: 4 << 20])):
        line = m.group(0).rstrip(b"\r")
        try:
            fields = next(csv.reader(io.StringIO(line.decode("utf-8"))))
        except (StopIteration, csv.Error, UnicodeDecodeError):
            continue
        return len(fields)
    return None
