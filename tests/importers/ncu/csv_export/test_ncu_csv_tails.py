"""The compiled cell splitter for the scan's tails (split_tails in nsroof/importers/_rowscan.c, through
scan.TailSplitter) returns what the Python twin's splitter (scan.split_tails_pyarrow) returns — the
same metric rows, the same texts per row, the same values — on every tail it accepts, and accepts the
rows ncu writes (quoted cells, doubled quotes, CRLF, the trailing comma, rule rows, UTF-8 text). What
it declines (a narrow row, a wide row with a metric, an empty line, a stray quote or carriage return,
bytes that are not UTF-8) makes the compiled scan decline the file (the robust reader reads it then)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from nsroof.importers.ncu.csv_export import scan

# the details page's tail columns from `Section Name` on (ncu 2024 layout); metric rows end after
# `Metric Value` with a trailing comma: 5 cells; rule rows fill all 9
NAMES = ["Section Name", "Metric Name", "Metric Unit", "Metric Value", "Rule Name"]
WIDE = 9
DETAIL = ["Section Name", "Metric Name", "Metric Unit", "Metric Value"]

pytestmark = pytest.mark.skipif(not scan.compiled_available(),
                                reason="the compiled splitter was not built (no C compiler at install time)")


def q(value: str) -> str:
    return '"' + value.replace('"', '""') + '"'


def metric(section: str, name: str, unit: str, value: str, *, quote_value: bool = True) -> str:
    return ",".join([q(section), q(name), q(unit), q(value) if quote_value else value]) + ",\n"


def rule(section: str = "SpeedOfLight", text: str = 'a rule, with "quotes"') -> str:
    return ",".join([q(section), q(""), q(""), q(""), q("SOLBottleneck"), q("OPT"), q(text), q("global"),
                     q("12.5")]) + "\n"


def split_tails_compiled(chunks: list[bytes], names: list[str], max_fields: int) -> scan.Split | None:
    """The tails' metric rows by the compiled splitter, all chunks at once (each chunk whole rows)."""
    splitter = scan.TailSplitter.start(names, max_fields)
    assert splitter is not None
    try:
        first_row = 0
        for chunk in chunks:
            splitter.feed(chunk, first_row)
            first_row += chunk.count(b"\n")
        return splitter.result()
    finally:
        splitter.close()


def routes(tails: bytes) -> tuple[scan.Split | None, scan.Split | None]:
    n = tails.count(b"\n")
    # the compiled splitter takes the tails window by window: here cut after every second row
    lines = [line + b"\n" for line in tails.split(b"\n")[:-1]]
    chunks = [b"".join(lines[i : i + 2]) for i in range(0, len(lines), 2)]
    return (split_tails_compiled(chunks, NAMES, WIDE),
            scan.split_tails_pyarrow(tails, n, NAMES, DETAIL, WIDE))


def texts(split: scan.Split) -> dict[str, list[str]]:
    _, coded, _ = split
    return {col: [names[i] for i in codes.tolist()] for col, (codes, names) in coded.items()}


def assert_same(compiled: scan.Split, arrow: scan.Split) -> None:
    assert compiled[0].tolist() == arrow[0].tolist()  # which tails are metric rows
    assert texts(compiled) == texts(arrow)
    values = arrow[2].combine_chunks() if hasattr(arrow[2], "combine_chunks") else arrow[2]
    assert compiled[2].to_pylist() == values.to_pylist()


def test_rows_as_ncu_writes_them() -> None:
    tails = "".join([
        metric("Command line profiler metrics", "gpu__time_duration.sum", "usecond", "2.50"),
        rule(),
        metric("GPU Speed Of Light Throughput", "Duration", "nsecond", "2,500"),
        metric("Launch Statistics", "Function Cache Configuration", "", "CachePreferNone"),
        metric("Section", 'a "quoted" label', "Kbyte/block", "1.02"),
        metric("Section", "µ-metric ✓", "%", "n/a"),
        rule("Occupancy"),
        metric("Command line profiler metrics", "gpu__time_duration.sum", "usecond", "3.50"),
    ]).encode()
    compiled, arrow = routes(tails)
    assert compiled is not None and arrow is not None
    assert_same(compiled, arrow)
    # rows 1 and 6 are rule rows: 6 metric rows, the first and last under one key
    assert compiled[0].tolist() == [0, 2, 3, 4, 5, 7]
    assert texts(compiled)["Metric Name"][4] == "µ-metric ✓"
    assert compiled[2].to_pylist()[0] == "2.50"


def test_crlf_and_unquoted_values() -> None:
    tails = (metric("S", "m", "u", "1", quote_value=False)
             + metric("S", "n", "", "")).replace("\n", "\r\n").encode()
    compiled, arrow = routes(tails)
    assert compiled is not None and arrow is not None
    assert_same(compiled, arrow)


@pytest.mark.parametrize("tails", [
    b'"S","m","u"\n',  # narrower than a metric row
    b'"S","m","u","1","","","","",""\n',  # a wide row with a metric
    b'"S","m","u","1",\n\n',  # an empty line
    b'"S","m","u","1"x,\n',  # text after a closing quote
    b'"S",m"x,"u","1",\n',  # a quote inside an unquoted cell
    b'"S","m","u",1\r2,\n',  # a carriage return inside a cell
    b'"S","\xff","u","1",\n',  # not UTF-8
    b'"S","m","u","1",,,,,,,,,\n',  # wider than the header
])
def test_declines_what_it_does_not_vouch_for(tails: bytes) -> None:
    compiled, _ = routes(tails)
    assert compiled is None


_CELL = st.sampled_from(["", "S", "Section, with comma", 'q"uote', "1,234.56", "µs", " pad "])
_METRIC = st.tuples(_CELL, _CELL, _CELL, _CELL, st.booleans()).map(
    lambda t: metric(t[0], t[1], t[2], t[3], quote_value=t[4] and '"' not in t[3] and "," not in t[3]))
_ODD = st.sampled_from(['"S","m"\n', '"S","m","u","1","x","y","z","w","v"\n', "\n", '"S","m","u","1"x,\n',
                        '"S","m","u","1",\r\n', '"S","","u","1",\n'])
# mostly rows as ncu writes them, now and then one of another kind
_ROW = st.one_of(_METRIC, _METRIC, _METRIC, _METRIC, st.sampled_from([rule(), rule("Occupancy", "x")]), _ODD)


@settings(max_examples=300, deadline=None)
@given(st.lists(_ROW, min_size=1, max_size=10))
def test_random_tails(rows: list[str]) -> None:
    compiled, arrow = routes("".join(rows).encode())
    if compiled is not None:
        assert arrow is not None, "the compiled splitter read tails the pyarrow route declines"
        assert_same(compiled, arrow)


def test_keys_follow_the_previous_row() -> None:
    # consecutive launches list their metrics in one order; the splitter predicts each row's key from
    # the previous row's: a launch with the order changed must still get the right texts
    a = [metric("S", f"m{i}", "u", str(i)) for i in range(4)]
    tails = "".join(a + a[::-1] + a[1:] + a[:1]).encode()
    compiled, arrow = routes(tails)
    assert compiled is not None and arrow is not None
    assert_same(compiled, arrow)
    assert texts(compiled)["Metric Name"] == ["m0", "m1", "m2", "m3", "m3", "m2", "m1", "m0", "m1", "m2",
                                              "m3", "m0"]
    assert np.asarray(compiled[0]).tolist() == list(range(12))
