"""Loading a kineto trace (nsroof.importers.trace.load): integers beyond 64 bits, over-long literals and
floats beyond a double are one-line errors naming the field; ROCm's string streams read; what strict JSON
refuses (NaN tokens, a BOM; in a range-profiler trace too) and undeclared fields read (the shared traces:
test_shared_traces.py)."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from nsroof import importers
from nsroof.errors import InputError
from tests._paths import DATA as TEST_DATA

DATA = TEST_DATA / "traces"


def test_a_31_digit_device_is_a_one_line_error_naming_the_field() -> None:
    with pytest.raises(InputError) as err:
        importers.read(DATA / "huge_int.json")
    text = str(err.value)
    assert "'device'" in text and "31 digits" in text and "\n" not in text


def test_a_literal_longer_than_python_converts_is_a_one_line_error(tmp_path: Path) -> None:
    path = tmp_path / "t.json"
    path.write_text('{"traceEvents": [{"ph": "X", "cat": "kernel", "name": "k", "ts": ' + "9" * 5000 + "}]}")
    with pytest.raises(InputError, match="a number no chrome trace holds"):
        importers.read(path)


def test_huge_integers_through_the_cli_exit_2_without_a_traceback(tmp_path: Path) -> None:
    from tests._cli import invoke

    code, stdout, stderr = invoke("analyze", str(DATA / "huge_int.json"), "-o", str(tmp_path / "r.parquet"))
    assert code == 2 and "Traceback" not in stdout + stderr
    assert not (tmp_path / "r.parquet").exists()


@pytest.mark.parametrize(("stream", "expected"), [("0x0", 0), ("0x1f", 31), ("stream 7", 7), ("7", 7),
                                                  ("0x" + "f" * 20, None), ("default", None)])
def test_rocm_string_streams(tmp_path: Path, stream: str, expected: int | None) -> None:
    import json

    trace = {"traceEvents": [{"ph": "X", "cat": "kernel", "name": "k", "pid": 2, "tid": "lane", "ts": 1,
                              "dur": 1, "args": {"stream": stream, "correlation": 1}}]}
    path = tmp_path / "t.json"
    path.write_text(json.dumps(trace))
    value = importers.read(path)[0]["stream"].iloc[0]
    assert (None if pd.isna(value) else int(value)) == expected


def _kernel_trace(**kernel: object) -> dict[str, object]:
    event = {"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 1, "dur": 2,
             "args": {"correlation": 1, "stream": 7}} | kernel
    return {"traceEvents": [event]}


def test_nan_and_infinity_tokens_read_through_the_standard_parser(tmp_path: Path) -> None:
    import json

    # Python's json module writes NaN / Infinity, which strict JSON (msgspec) refuses: the standard parser
    # reads them and the same declared schema checks the result; a NaN dur is a NaN duration and a warning
    path = tmp_path / "t.json"
    path.write_text(json.dumps(_kernel_trace(dur=float("nan"),
                                             args={"correlation": 1, "shared memory": float("inf")})))
    assert "NaN" in path.read_text() and "Infinity" in path.read_text()
    frame, facts = importers.read(path)
    assert len(frame) == 1 and pd.isna(frame["gpu__time_duration.sum"].iloc[0])
    assert pd.isna(frame["launch__shared_mem_per_block"].iloc[0])  # a non-finite number reads as NaN
    assert any("non-finite 'dur'" in w for w in facts.warnings)


def test_nan_and_infinity_tokens_in_a_range_profiler_trace_read_as_in_any_trace(tmp_path: Path) -> None:
    # fuzz case 6192 (seed 20261207): `Infinity` as a flow event's pid in a CUPTI range-profiler trace: load
    # read it as null (the text restated), load_ranges, reading the file again for the counters, converted the
    # standard parser's float and msgspec refused it -> ValidationError; both read it alike now
    import json

    events = [{"ph": "X", "cat": "cuda_profiler_range", "name": "k0", "pid": 0, "tid": 1, "ts": 1, "dur": 5,
               "args": {"sm__cycles_elapsed.avg": 100.0, "dram__bytes.sum": float("inf")}},
              {"ph": "f", "id": 1, "pid": float("inf"), "tid": 1, "ts": 2, "cat": "ac2g", "name": "ac2g"}]
    path = tmp_path / "t.json"
    path.write_text(json.dumps({"traceEvents": events}))
    assert "Infinity" in path.read_text()
    frame, facts = importers.read(path)
    assert frame["kernel_name"].tolist() == ["k0"] and frame["sm__cycles_elapsed.avg"].tolist() == [100.0]
    assert pd.isna(frame["dram__bytes.sum"].iloc[0])  # a non-finite counter reads as NaN
    assert any("CUPTI range-profiler rows" in w for w in facts.warnings)


def test_a_bom_a_top_level_list_and_undeclared_fields_of_any_shape_read(tmp_path: Path) -> None:
    import json

    trace = _kernel_trace(args={"correlation": 1, "stream": 7, "deep": {"a": [[[[[1]]]]]},
                                "Call stack": None})
    bom = tmp_path / "bom.json"
    bom.write_bytes(b"\xef\xbb\xbf" + json.dumps(trace).encode())
    listed = tmp_path / "list.json"
    listed.write_text(json.dumps(trace["traceEvents"]))
    for path in (bom, listed):
        frame = importers.read(path)[0]
        assert frame["kernel_name"].tolist() == ["k"] and int(frame["stream"].iloc[0]) == 7


def test_a_float_beyond_any_double_is_a_one_line_error(tmp_path: Path) -> None:
    path = tmp_path / "t.json"
    path.write_text('{"traceEvents": [{"ph": "X", "cat": "kernel", "name": "k", "ts": 1e999}]}')
    with pytest.raises(InputError, match="a number no chrome trace holds") as err:
        importers.read(path)
    assert "\n" not in str(err.value)


# --------------------------------------------------------------------------- bounded memory


def _frames_equal(a: tuple[pd.DataFrame, object], b: tuple[pd.DataFrame, object]) -> None:
    """The kernel and ops tables equal (but for the file's name)."""
    for x, y in ((a[0], b[0]), (a[1].ops, b[1].ops)):  # type: ignore[attr-defined]
        pd.testing.assert_frame_equal(x.drop(columns=["source", "recorded_in"], errors="ignore"),
                                      y.drop(columns=["source", "recorded_in"], errors="ignore"))


@pytest.mark.parametrize("name", ["cross_thread.json", "graph_capture.json", "rocm_capture.json"])
def test_pages_handed_back_every_few_events_change_nothing(monkeypatch: pytest.MonkeyPatch,
                                                           name: str) -> None:
    from nsroof.importers.trace import load as trace_load

    whole = importers.read(DATA / name)
    monkeypatch.setattr(trace_load, "CHUNK", 2)  # a hand-back of the text's pages after every second event
    _frames_equal(importers.read(DATA / name), whole)


def test_a_gzip_stream_larger_than_its_trailer_says_is_read_whole(tmp_path: Path) -> None:
    import gzip

    # two gzip members: the trailer read to size the buffer is the last member's (17 bytes), not the stream's
    text = (DATA / "cross_thread.json").read_bytes()
    path = tmp_path / "two_members.json.gz"
    path.write_bytes(gzip.compress(text[:-17]) + gzip.compress(text[-17:]))
    _frames_equal(importers.read(path), importers.read(DATA / "cross_thread.json"))


def test_only_read_categories_are_kept_and_repeated_texts_are_shared(tmp_path: Path) -> None:
    import json

    from nsroof.importers.trace.load import load

    op = {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "dur": 1,
          "args": {"Input Dims": [[8, 32], [32, 16]], "Input type": ["float", "float"]}}
    events = [op | {"ts": t} for t in (1, 5)]
    events += [{"ph": "s", "cat": "ac2g", "name": "flow", "id": 1, "pid": 1, "tid": 1, "ts": 2},
               {"ph": "X", "cat": "python_function", "name": "f", "pid": 1, "tid": 1, "ts": 0, "dur": 9}]
    path = tmp_path / "t.json"
    path.write_text(json.dumps({"traceEvents": events}))
    loaded = load(path)
    assert [e.name for e in loaded.ops] == ["aten::mm", "aten::mm"] and not loaded.annotations
    assert not loaded.activities and not loaded.launches  # the flow event and the Python frame are dropped
    first, second = (e.args for e in loaded.ops)
    assert first.input_dims == [[8, 32], [32, 16]] and first.input_dims is second.input_dims
    assert first.input_type is second.input_type and loaded.ops[0].name is loaded.ops[1].name


def test_invalid_utf8_inside_an_event_is_a_one_line_error(tmp_path: Path) -> None:
    path = tmp_path / "t.json"
    path.write_bytes(b'{"traceEvents": [{"ph": "X", "cat": "kernel", "name": "k\xff", "ts": 1}]}')
    with pytest.raises(InputError, match="not UTF-8 text") as err:
        importers.read(path)
    assert "\n" not in str(err.value)


def test_decompressed_memory_grows_by_copy_where_it_cannot_be_resized() -> None:
    import mmap

    from nsroof.importers.trace.load import _grown

    class Unresizable:  # macOS: anonymous maps have no mremap, resize raises SystemError
        def __init__(self, data: bytes) -> None:
            self.data, self.closed = data, False

        def resize(self, size: int) -> None:
            raise SystemError("mmap: resizing not available--no mremap()")

        def __getitem__(self, index: slice) -> bytes:
            return self.data[index]

        def close(self) -> None:
            self.closed = True

    small = Unresizable(b"[1, 2, 3]xxxx")
    bigger = _grown(small, 9, 1 << 16)  # type: ignore[arg-type]
    assert (isinstance(bigger, mmap.mmap) and len(bigger) == 1 << 16 and bigger[:9] == b"[1, 2, 3]"
            and small.closed)
