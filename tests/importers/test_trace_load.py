"""Loading a kineto trace (nsroof.importers.trace_load): integers beyond 64 bits and over-long literals are
one-line errors naming the field; ROCm's string streams read (the shared traces: test_shared_traces.py)."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from nsroof import importers
from nsroof.errors import InputError

DATA = Path(__file__).resolve().parents[1] / "data" / "traces"


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

    trace = {"traceEvents": [{"ph": "X", "cat": "kernel", "name": "k", "pid": 2, "tid": "lane", "ts": 1, "dur": 1,
                              "args": {"stream": stream, "correlation": 1}}]}
    path = tmp_path / "t.json"
    path.write_text(json.dumps(trace))
    value = importers.read(path)[0]["stream"].iloc[0]
    assert (None if pd.isna(value) else int(value)) == expected
