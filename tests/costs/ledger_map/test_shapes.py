"""nsroof.costs.ledger_map.shapes: the sizes a ledger-mapping rule reads, from emit_nvtx markers (`aten::op,
seq = N, op_id = M, sizes = [[...]]`) in NVTX paths and from a trace's input-shape texts."""

from __future__ import annotations

from nsroof.costs.ledger_map import shapes
from tests.roofs.test_ledger_join import ADDMM


class TestMarkers:
    def test_parse_emit_nvtx_marker(self) -> None:
        (m,) = shapes.parse_markers(f"outer/{ADDMM}")
        assert (m.op, m.seq, m.op_id) == ("aten::addmm", 5, 72)
        assert m.sizes == [[256], [64, 128], [128, 256]]

    def test_innermost_marker_wins(self) -> None:
        markers = shapes.parse_markers("aten::linear, seq = 4, op_id = 70, "
                                   f"sizes = [[64, 128], [256, 128], [256]], input_op_ids = []/{ADDMM}")
        assert [m.op for m in markers] == ["aten::linear", "aten::addmm"]

    def test_scalar_inputs_and_no_op_id(self) -> None:
        (m,) = shapes.parse_markers("aten::add, seq = 1, sizes = [[2, 3], [], []]")
        assert m.op_id is None and m.sizes == [[2, 3], [], []]

    def test_markers_without_sizes_are_ignored(self) -> None:
        assert shapes.parse_markers("aten::mm, seq = 9") == []

    def test_input_shapes(self) -> None:
        assert shapes.parse_input_shapes("[[4, 8], [], [8]]") == [[4, 8], [], [8]]
        assert shapes.parse_input_shapes("not a list") is None
