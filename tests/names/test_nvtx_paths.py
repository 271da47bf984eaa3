"""NVTX range names from ncu's CSV cells (nsroof.names.nvtx_paths): names and messages holding `:`."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from nsroof.importers.ncu import csv_export
from nsroof.names import nvtx_paths as nvtx

NONE6 = ":none:none:none:none:none:none"


def q(value: str) -> str:
    return '"' + value.replace('"', '""') + '"'


@pytest.mark.parametrize(
    ("cell", "names"),
    [
        # attributes with a message that holds ':' — the message is the range name
        ('4242  "train:block 0: mlp:Int64:42:RGB:0xff00ff00:ASCII:block 0: mlp" ', ["block 0: mlp"]),
        ('1  "nsroof:layer1:Int64:42:RGB:0xff00ff00:ASCII:layer1" ', ["layer1"]),
        ('1  "nsroof:a:b:c:Int64:1:ARGB:0xff000000:ASCII:a:b:c" ', ["a:b:c"]),
        # no attributes: the six fields are `none`, the name keeps its ':' and ','
        (f'7  "<default domain>:aten::addmm, seq = 5, op_id = 72{NONE6}"  '
         f'"<default domain>:step 0: fwd{NONE6}" ',
         ["aten::addmm, seq = 5, op_id = 72", "step 0: fwd"]),
        # a message that is not the name (no such split): the last six fields go
        ('1  "d:x:y:Int64:1:RGB:0xff:ASCII:other" ', ["x:y"]),
        ('', []),
    ],
)
def test_push_pop_names(cell: str, names: list[str]) -> None:
    assert [r.name for r in nvtx.parse_push_pop(cell)] == names


def test_start_end_name_with_colons() -> None:
    cell = ' "100:train:epoch 1: eval:Int64:3:RGB:0xff00ff00:ASCII:epoch 1: eval" '
    ranges = nvtx.parse_start_end(cell)
    assert [(r.domain, r.name) for r in ranges] == [("train", "epoch 1: eval")]


def test_csv_export_reads_the_name(tmp_path: Path) -> None:
    header = ["ID", "Process ID", "Process Name", "Host Name",
              "thread Domain:Push/Pop_Range:PL_Type:PL_Value:CLR_Type:Color:Msg_Type:Msg", "Kernel Name",
              "Context", "Stream", "Block Size", "Grid Size", "Device", "CC", "Section Name", "Metric Name",
              "Metric Unit", "Metric Value"]
    cell = '4242  "train:block 0: mlp:Int64:42:RGB:0xff00ff00:ASCII:block 0: mlp" '
    row = ["0", "4242", "py", "h", cell, "mlp_kernel(float *)", "1", "7", "(1, 1, 1)", "(1, 1, 1)", "0",
           "9.0", "Command line profiler metrics", "gpu__time_duration.sum", "nsecond", "1000"]
    path = tmp_path / "nvtx.csv"
    path.write_text(",".join(map(q, header)) + "\n" + ",".join(map(q, row)) + ",\n")
    df = csv_export.read(path)[0]
    assert df["nvtx_ranges"].iloc[0] == ["block 0: mlp"]
    assert df["nvtx_path"].iloc[0] == "block 0: mlp"


# ---------------------------------------------------------------- stable paths (emit_nvtx counters out)


@pytest.mark.parametrize(
    ("path", "stable", "grouped"),
    [
        # the real emit_nvtx layout: seq, op_id, sizes, input_op_ids (shapes hold ', ' themselves)
        ("fwd/aten::addmm, seq = 12, op_id = 5, sizes = [[64, 128], [128, 256]], input_op_ids = [(3, 0)]",
         "fwd/aten::addmm, sizes = [[64, 128], [128, 256]]", "fwd/aten::addmm"),
        ("aten::linear, seq = 12, op_id = 3/aten::relu, seq = 13, op_id = 6",
         "aten::linear/aten::relu", "aten::linear/aten::relu"),
        ("aten::mm, op_id = 7, sizes = [[2], []]", "aten::mm, sizes = [[2], []]", "aten::mm"),
        # names that are not emit_nvtx's keep every character
        ("train/step 0: fwd, bwd", "train/step 0: fwd, bwd", "train/step 0: fwd, bwd"),
        ("", "", ""),
    ],
)
def test_stable_nvtx_path_drops_the_counters(path: str, stable: str, grouped: str) -> None:
    assert nvtx.stable_nvtx_path(path) == stable
    assert nvtx.stable_nvtx_path(path, keep_sizes=False) == grouped


# the token pattern as first written (lazy, the lookahead tried at every character): the reference
PUSH_POP = ('21096  "<default domain>:model.forward:none:none:none:none:none:none"  '
            '"<default domain>:aten::addmm, seq = 12, op_id = 5, sizes = [[64, 128], [128, 256]], '
            'input_op_ids = [(3, 0)]:none:none:none:none:none:none"  '
            '"nsroof:layer1:Int64:42:RGB:0xff00ff00:ASCII:layer1" ')
START_END = ' "100:nsroof:step0:none:none:none:none:none:none" '


def test_push_pop_cell() -> None:
    ranges = nvtx.parse_push_pop(PUSH_POP)
    assert [(r.domain, r.name) for r in ranges] == [
        ("<default domain>", "model.forward"),
        ("<default domain>",
         "aten::addmm, seq = 12, op_id = 5, sizes = [[64, 128], [128, 256]], input_op_ids = [(3, 0)]"),
        ("nsroof", "layer1"),  # a range with attributes: the six trailing fields are payload/color/message
    ]


def test_start_end_cell() -> None:
    assert ([(r.domain, r.name, r.kind) for r in nvtx.parse_start_end(START_END)]
            == [("nsroof", "step0", "start_end")])


def test_flat_ranges_push_pop_then_start_end() -> None:
    got = nvtx.ranges(PUSH_POP, START_END)
    assert got[0] == "model.forward" and got[-2:] == ("layer1", "step0")
    assert nvtx.path(got).startswith("model.forward/aten::addmm, seq = 12")


def test_empty_cells() -> None:
    assert nvtx.ranges("", "") == ()
    assert nvtx.parse_push_pop("   ") == []


def test_unescaped_quote_inside_a_token() -> None:
    cell = ('9  "<default domain>:outer "quoted", name:none:none:none:none:none:none"  '
            '"<default domain>:inner:colon:none:none:none:none:none:none" ')
    assert nvtx.ranges(cell, "") == ('outer "quoted", name', "inner:colon")


def test_column_names() -> None:
    assert nvtx.is_push_pop_column("thread Domain:Push/Pop_Range:PL_Type:PL_Value:CLR_Type:Color:"
                                   "Msg_Type:Msg")
    assert nvtx.is_push_pop_column("thread Domain:Push/Pop_Range")  # shorter form said to appear in 2026+
    assert nvtx.is_start_end_column("Id:Domain:Start/Stop_Range:PL_Type:PL_Value:CLR_Type:Color:Msg_Type:Msg")


_LAZY_TOKEN = re.compile(r'"(.*?)"(?=\s+"|\s*$)', re.DOTALL)
_PIECES = st.sampled_from(['"', " ", "  ", "a", ":", "\n", "none", "<default domain>", ",", "\t"])


@settings(max_examples=400, deadline=None)
@given(st.lists(_PIECES, max_size=16).map("".join))
def test_token_pattern_equals_the_lazy_one(text: str) -> None:
    assert nvtx._TOKEN.findall(text) == _LAZY_TOKEN.findall(text)


@settings(max_examples=200, deadline=None)
@given(st.lists(_PIECES, max_size=16).map("".join), st.lists(_PIECES, max_size=16).map("".join))
def test_ranges_are_the_parsed_ranges_names(push_pop: str, start_end: str) -> None:
    expected = nvtx.enclosing(nvtx.parse_push_pop(push_pop), nvtx.parse_start_end(start_end))
    assert nvtx.ranges.__wrapped__(push_pop, start_end) == expected
