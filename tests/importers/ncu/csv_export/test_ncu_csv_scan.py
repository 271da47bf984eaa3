"""The prefix scan's row splitters — the compiled one (nsroof/importers/_rowscan.c) and the Python loop
(one `mm.readline` per row) — return exactly what the earlier splitter (one prefix slice, compare and
`find` per row, kept below as the reference) returned: the same tails, heads, launch IDs, run starts
and blank-line positions, on every details fixture and on generated rows built to sit at the edge of
the prefix test (a row one byte short of the prefix, a prefix that differs in its last byte, a row
that is the prefix and nothing else, blank lines of every kind). Never laxer: a row either keeps as a
continuation is one the reference kept. Tests of the compiled splitter skip where it was not built."""

from __future__ import annotations

import mmap
import re
from dataclasses import astuple, dataclass
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from nsroof.importers.ncu import csv_bytes as text
from nsroof.importers.ncu.csv_export import find_layout, positions, scan
from tests.importers.ncu.csv_export.test_ncu_csv_readers import (
    DATA,
    KERNELS,
    LOCAL,
    SHARED,
    assert_all_readers_agree,
    export_lines,
    is_details,
    metric_row,
    rule_row,
    scan_result,
    write,
)


def reference_scan_rows(export: text.Export, section_at: int) -> Split | None:
    """The splitter _scan_rows replaced (commit b00309f), unchanged but for the madvise calls."""
    tails: list[bytes] = []
    heads: list[bytes] = []
    run_ids: list[int] = []
    starts: list[int] = []
    blanks: list[int] = []
    head_re = re.compile(rb'"([0-9]+)",(?:"[^"\n]*(?:""[^"\n]*)*",){' + str(section_at - 1).encode() + rb"}")
    try:
        with open(export.path, "rb") as fh:
            mm = mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ)
    except (OSError, ValueError):
        return None
    try:
        size = len(mm)
        if size <= export.data_offset or mm[size - 1] != 10:
            return None
        find, keep, match = mm.find, tails.append, head_re.match
        pos = export.data_offset
        prefix = b"\n"
        plen = 1
        while pos < size:
            while mm[pos : pos + plen] == prefix:
                after = pos + plen
                pos = find(b"\n", after) + 1
                keep(mm[after:pos])
            if pos >= size:
                break
            nl = find(b"\n", pos)
            head = match(mm, pos, nl)
            if head is None:
                if mm[pos:nl].strip():
                    return None
                blanks.append(len(tails))
                pos = nl + 1
                continue
            prefix = mm[pos : head.end()]
            plen = len(prefix)
            heads.append(prefix[:-1])
            run_ids.append(int(head.group(1)))
            starts.append(len(tails))
            keep(mm[pos + plen : nl + 1])
            pos = nl + 1
    finally:
        mm.close()
    return Split(tails, heads, run_ids, starts, blanks)


@dataclass
class Split:
    """A splitter's result with its tails as a list (the reference's form)."""

    tails: list[bytes]
    heads: list[bytes]
    run_ids: list[int]
    starts: list[int]
    blanks: list[int]


def as_split(s: scan.Scanned | None) -> Split | None:
    if s is None:
        return None
    # each row ends in its only newline (a CR before it stays in the row, as splitlines would not)
    tails = [t + b"\n" for t in b"".join(s.chunks).split(b"\n")[:-1]]
    assert len(tails) == s.count
    return Split(tails, s.heads, s.run_ids, s.starts, s.blanks)


SPLITTERS = ["compiled", "python"]


def needs(splitter: str) -> str:
    if splitter == "compiled" and not scan.compiled_available():
        pytest.skip("the compiled splitter was not built (no C compiler at install time)")
    return splitter


@pytest.fixture(params=SPLITTERS)
def splitter(request: pytest.FixtureRequest) -> str:
    return needs(str(request.param))


def both(path: Path, splitter: str = "python") -> tuple[Split | None, Split | None]:
    export = text.open_export(path)
    try:
        section_at = find_layout(export).header.index("Section Name")
        new = scan.scan_rows(export, section_at, compiled=splitter == "compiled")
        return as_split(new), reference_scan_rows(export, section_at)
    finally:
        export.close()


def assert_identical(path: Path, splitter: str = "python") -> Split | None:
    new, ref = both(path, splitter)
    assert (new is None) == (ref is None)
    if new is not None and ref is not None:
        assert astuple(new) == astuple(ref)
    return new


# LOCAL and SHARED hold the details pages only (a raw page has no scan), and no gzip file (*.csv)
@pytest.mark.parametrize("name", LOCAL)
def test_repo_fixtures(name: str, splitter: str) -> None:
    path = DATA / "ncu" / name
    assert is_details(path)
    assert assert_identical(path, splitter) is not None


@pytest.mark.parametrize("name", SHARED)
def test_shared_fixtures(shared_fixtures: Path, name: str, splitter: str) -> None:
    path = shared_fixtures / name
    assert is_details(path)
    assert_identical(path, splitter)


def test_generated_edge_rows(tmp_path: Path, splitter: str) -> None:
    lines = export_lines()
    row = metric_row(0, KERNELS[0], "S", "m", "u", "1")
    prefix = row[: row.index('"S"')]
    edge = [
        lines[0], *lines[1:4],
        prefix[:-1],  # the prefix without its last comma, alone on its line: text, declined by both
    ]
    assert assert_identical(write(tmp_path, edge, name="short.csv"), splitter) is None
    # the prefix with its last cell changed by one byte: a new launch, not a continuation
    other = prefix[:-3] + '9",' + '"S","m","u","2",'
    cases = {
        "near.csv": [lines[0], *lines[1:4], other, *lines[4:8]],
        "bare.csv": [lines[0], *lines[1:4], prefix, *lines[4:]],  # the prefix and nothing after it
        "blanks.csv": [lines[0], " ", *lines[1:3], "", "\r", "  \t", *lines[3:]],
        "crlf.csv": lines,
    }
    for name, body in cases.items():
        path = write(tmp_path, body, name=name, newline="\r\n" if name == "crlf.csv" else "\n")
        assert assert_identical(path, splitter) is not None, name


def test_empty_line_before_the_first_launch_is_declined_as_before(
    tmp_path: Path, splitter: str
) -> None:
    # the reference took a bare LF there for the (empty) prefix it started with and kept the next row
    # whole as a tail, so the scan declined; the new splitter declines it outright
    lines = export_lines()
    path = write(tmp_path, [lines[0], "", *lines[1:]])
    new, ref = both(path, splitter)
    assert new is None and ref is not None and ref.tails[0].startswith(b'"0","4242"')
    assert scan_result(path) is None
    assert_all_readers_agree(path, scan_applies=False)


_ROWS = [metric_row(k, KERNELS[k], "S", f"m{i}", "u", str(i)) for k in (0, 1) for i in range(3)]
_PIECES = st.one_of(
    st.sampled_from(_ROWS),
    st.sampled_from([rule_row(0, KERNELS[0]), rule_row(1, KERNELS[1])]),
    st.sampled_from(["", " ", "\r", "\t "]),
    # a row cut, or changed in one byte, anywhere in its identity prefix
    st.tuples(st.sampled_from(_ROWS), st.integers(1, 400), st.sampled_from(["", "x", '"', ","])).map(
        lambda t: t[0][: t[1]] + t[2] + t[0][t[1] + 1 :] if t[2] else t[0][: t[1]]),
)


@pytest.mark.parametrize("which", SPLITTERS)
@settings(max_examples=150, deadline=None)
@given(st.lists(_PIECES, min_size=1, max_size=12))
def test_random_rows(tmp_path_factory: pytest.TempPathFactory, which: str, body: list[str]) -> None:
    path = write(tmp_path_factory.mktemp("scan"), [export_lines()[0], *body])
    new, ref = both(path, needs(which))
    if new is None:
        # stricter than the reference only where it went wrong: a bare LF before the first launch
        assert ref is None or "" in body
    else:
        assert ref is not None and astuple(new) == astuple(ref)


@pytest.mark.parametrize("window_bytes", [64, 4096])
def test_windows_shorter_than_a_row(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, window_bytes: int, splitter: str
) -> None:
    # pages are dropped per window (and the compiled splitter is called per window); a window shorter
    # than a row (~400 bytes here) must not break it
    monkeypatch.setattr(scan, "SCAN_WINDOW_BYTES", window_bytes)
    lines = export_lines()
    path = write(tmp_path, [lines[0], *(lines[1:] * 20)])
    assert assert_identical(path, splitter) is not None


@settings(max_examples=200, deadline=None)
@given(st.sets(st.one_of(st.integers(0, 50), st.integers(0, 2**62)), min_size=1, max_size=20), st.data())
def test_launch_positions_by_table_or_search(ids: set[int], data: st.DataObject) -> None:
    # launches numbered 0, 1, 2 … go through a lookup table, IDs far apart through a binary search:
    # both give each row's launch index
    sorted_ids = np.array(sorted(ids), dtype=np.int64)
    rows = np.array(data.draw(st.lists(st.sampled_from(sorted(ids)), max_size=30)), dtype=np.int64)
    assert positions(sorted_ids, rows).tolist() == np.searchsorted(sorted_ids, rows).tolist()
