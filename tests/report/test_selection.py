"""report.selection: whole kernels kept, case-insensitive patterns, step lists, one-line errors."""

from __future__ import annotations

import pandas as pd
import pytest

from nsroof.errors import NsroofError
from nsroof.report.selection import Selection, parse_steps


def _frame() -> pd.DataFrame:
    # two kernels × two levels; the first ran in step 1 on an H100, the second in step 2 on an A100
    return pd.DataFrame({
        "source": ["a.csv"] * 4, "kernel_id": [1, 1, 2, 2], "level": ["dram", "l2"] * 2,
        "function": ["sgemm_nn", "sgemm_nn", "softmax", "softmax"],
        "kernel_name": ["void sgemm_nn<float>()", "void sgemm_nn<float>()", "softmax", "softmax"],
        "nvtx_path": ["step/fwd/attn", "step/fwd/attn", "step/bwd", "step/bwd"],
        "device": ["NVIDIA H100", "NVIDIA H100", "NVIDIA A100", "NVIDIA A100"],
        "step": pd.array([1, 1, 2, 2], dtype="Int64"),
    })


def test_each_option_keeps_whole_kernels() -> None:
    f = _frame()
    assert list(Selection(kernel="GEMM").apply(f)["kernel_id"]) == [1, 1]
    assert list(Selection(nvtx="bwd").apply(f)["kernel_id"]) == [2, 2]
    assert list(Selection(step="2").apply(f)["kernel_id"]) == [2, 2]
    assert list(Selection(device="a100").apply(f)["kernel_id"]) == [2, 2]
    assert len(Selection(source=r"a\.csv").apply(f)) == 4
    assert len(Selection().apply(f)) == 4 and not Selection()
    assert Selection(kernel="x", step="1-2").describe() == "--kernel x --step 1-2"


def test_steps_and_errors() -> None:
    assert parse_steps("3") == [3] and parse_steps("2-4") == [2, 3, 4] and parse_steps("1,3") == [1, 3]
    for bad in ("", "a", "4-2", "1,,2"):
        with pytest.raises(NsroofError, match="--step"):
            parse_steps(bad)
    with pytest.raises(NsroofError, match="not a valid regular expression"):
        Selection(kernel="(").apply(_frame())
    with pytest.raises(NsroofError, match="no kernel matches --kernel conv: 2 kernels in x.parquet"):
        Selection(kernel="conv").apply(_frame(), what="x.parquet")


def test_a_step_the_report_does_not_hold_names_the_steps_it_holds() -> None:
    f = _frame().assign(step=pd.array([2, 2, 4, 4], dtype="Int64"))
    with pytest.raises(NsroofError) as caught:
        Selection(step="1").apply(f, what="r.parquet")
    assert str(caught.value) == "no step 1: r.parquet holds steps 2, 4"
    # a list or range is checked whole: a step left out silently would shrink what the user reads as asked
    with pytest.raises(NsroofError, match=r"^no steps 1, 3: the report holds steps 2, 4$"):
        Selection(step="1-4").apply(f)
    assert list(Selection(step="2,4").apply(f)["step"]) == [2, 2, 4, 4]
    # a report that marks no steps keeps the message saying how to mark them
    none = _frame().assign(step=pd.array([None] * 4, dtype="Int64"))
    with pytest.raises(NsroofError, match="it marks no steps"):
        Selection(step="1").apply(none)


def test_a_long_step_list_folds_its_runs() -> None:
    from nsroof.report.selection import step_list

    assert step_list([2, 3, 4]) == "2, 3, 4"
    assert step_list([*range(1, 41), 42]) == "1-40, 42"
