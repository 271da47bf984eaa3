"""nsroof.markdown.table: the one Markdown table renderer of the generated docs."""

from __future__ import annotations

from nsroof import markdown


def test_a_table_is_header_separator_and_rows_with_cells_as_given() -> None:
    assert markdown.table(["#", "formula", "notes"], [(1, "`a × b`", ""), (2, "**x**", "CC ≤ 7")]) == [
        "| # | formula | notes |",
        "|---|---|---|",
        "| 1 | `a × b` |  |",  # an empty cell keeps its place
        "| 2 | **x** | CC ≤ 7 |",
    ]


def test_a_pipe_inside_a_cell_is_escaped_so_it_cannot_end_the_cell() -> None:
    lines = markdown.table(["pattern"], [["`A100|H100`"]])
    assert lines[-1] == "| `A100\\|H100` |"
    assert lines[-1].replace("\\|", "").count("|") == 2  # only the row's own borders remain


def test_no_rows_is_a_header_only_table() -> None:
    assert markdown.table(["a", "b"], []) == ["| a | b |", "|---|---|"]
