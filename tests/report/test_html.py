"""The HTML report: self-contained, one table row per kernel grouped by NVTX path, the run summary's
numbers, everything escaped, and the same bytes for the same report."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from nsroof.report import html
from tests._cli import invoke, nsroof_process
from tests.report.page_parse import Page
from tests.report.report_frames import five_kernels, kernel, make_report

EVIL = 'void evil<T="a&b">(float*, <script>alert(1)</script>)'


@pytest.fixture(scope="module")
def report() -> pd.DataFrame:
    return five_kernels()


@pytest.fixture(scope="module")
def page_text(report: pd.DataFrame) -> str:
    return html.render(report, metadata={"nsroof_version": "0.1.0", "schema_version": "1",
                                         "inputs": [{"name": "run.csv", "sha256": "ab" * 32}]})


@pytest.fixture(scope="module")
def page(page_text: str) -> Page:
    return Page(page_text)


# ------------------------------------------------------------------------------------ self-contained


def test_nothing_is_fetched_from_the_network(page_text: str, page: Page) -> None:
    assert not re.search(r"""(src|href)\s*=\s*["']?\s*(https?:)?//""", page_text)
    assert all(u.startswith("#") for u in page.urls)  # only in-page SVG references (xlink:href="#m…")
    assert page.tags.get("link", 0) == 0 and page.tags.get("img", 0) == 0 and page.tags.get("iframe", 0) == 0
    assert page.scripts == [{}]  # one inline script, no src
    assert "@import" not in page_text
    assert all(ref.startswith("#") for ref in re.findall(r"url\(([^)]*)\)", page_text))  # SVG clip paths only


def test_charts_are_inline_svg_with_unique_ids(page: Page) -> None:
    assert page.tags["svg"] == 4  # all levels + DRAM + L2 + L1
    assert page.tags["path"] > 20
    assert len(page.ids) == len(set(page.ids)), "SVG ids must not collide between charts"


# ------------------------------------------------------------------------------------- the table


def test_one_row_per_kernel_grouped_by_nvtx_path(page: Page) -> None:
    assert len(page.rows) == 5
    # groups, longest first: model/layer1 (1.0 + 0.5 ms), model/layer2 (0.2 + 0.2 ms), no range (0.1 ms)
    assert [g.split(" — ")[0] for g in page.groups] == ["model/layer1", "model/layer2", "(no NVTX range)"]
    assert page.groups[0] == "model/layer1 — 2 kernel(s), 75.0% of time"  # 1.5 / 2.0 ms
    assert page.column("kernel") == ["gemm", "copy", "mystery", "softmax<float>", "bogus"]


def test_rows_carry_the_report_verdicts(page: Page) -> None:
    assert page.column("DRAM") == ["compute", "memory", "unknown", "memory", "memory"]
    assert page.column("L2") == ["compute", "memory", "unknown", "unknown", "memory"]
    assert page.column("duration") == ["1 ms", "500 us", "200 us", "200 us", "100 us"]
    assert page.column("share") == ["50.0%", "25.0%", "10.0%", "10.0%", "5.0%"]
    # gemm's floor: max over levels of max(10e9 / 20e12, bytes / bw)
    # = max(0.5 ms, 0.5 ms, 0.4 ms, 0.25 ms) = 500 µs
    assert page.column("time floor")[0] == "500 us"
    assert page.column("× floor")[0] == "2.00×"  # 1 ms / 0.5 ms
    assert page.column("headroom") == ["—"] * 5  # no ledger join
    assert page.column("⚠") == ["", "", "", "", "⚠"]
    assert "excess traffic" not in page.headers
    bound_attr = [r["attrs"]["data-bound"] for r in page.rows]  # type: ignore[index]
    assert bound_attr == ["compute", "memory", "unknown", "memory", "memory"]


def test_ledger_columns_appear_when_the_join_ran() -> None:
    df = make_report([
        kernel(0, "gemm", 1e-3, 10e9, {"dram": 1e9, "l2": 2e9, "l1": 5e9},
               ledger_op="gemm(m=1024,n=1024,k=4768)",
               excess_traffic=2.5, headroom=2.0, ideal_time_s=0.5e-3, expected_flops=10e9, min_bytes=0.4e9),
        kernel(1, "copy", 1e-3, 0.0, {"dram": 1e9, "l2": 1e9, "l1": 1e9}),
    ])
    p = Page(html.render(df, with_charts=False))
    assert p.column("excess traffic") == ["2.50×", "—"]  # 1e9 DRAM bytes / 0.4e9 compulsory
    assert p.column("headroom") == ["2.00×", "—"]  # 1 ms / 0.5 ms ideal
    assert p.column("ledger op") == ["gemm(m=1024,n=1024,k=4768)", ""]



def test_a_cpu_report_names_its_matmul_roof_matrix_and_its_rows_ops() -> None:
    # "tensor" (tensor cores) is a GPU's word: a CPU op profile's bf16 matmul runs under its matmul peak
    cpu = {"device": "Intel(R) Xeon(R) Processor", "peak_flop_per_s": 2e12,
           "ceiling_source": "measured:cpu.json", "bandwidth": {"dram": 3e10, "l2": 3e11, "l1": 4e11}}
    df = make_report([kernel(0, "aten::mm", 1e-3, 1e9, {"dram": 1e8, "l2": 1e8, "l1": 1e8}, machine=cpu,
                             precision="tensor", kind="cpu_op")])
    p = Page(html.render(df, with_charts=False))
    assert p.column("precision") == ["matrix"]
    text = re.sub(r"<[^>]+>", "|", html.render(df, with_charts=False))
    assert "||compute||matrix||" in text and "tensor" not in text  # the ceilings table too
    # and its rows are ops: a CPU runs no kernels
    assert p.headers[1] == "op" and "1 op, total op time 1 ms" in text and "1| op(s)" in text


# ---------------------------------------------------------------------------------------- summary


def test_summary_shows_devices_ceilings_and_bound_shares(page_text: str) -> None:
    text = re.sub(r"<[^>]+>", "|", page_text)
    assert "5 kernels, total kernel time 2 ms" in text
    assert "|GPU-A||9.0||5||100.0%|" in text
    for roof in ("|compute||fp32||20 TFLOP/s||spec:GPU-A||3|", "|bandwidth||DRAM||2 TB/s||spec:GPU-A||5|"):
        assert roof in text
    # DRAM: memory = copy 0.5 + softmax 0.2 + bogus 0.1 = 0.8 of 2.0 ms = 40 %; compute = gemm 50 %;
    # unknown 10 %
    assert "|DRAM||40.0%||50.0%||10.0%|" in text
    # L2: softmax's L2 bytes are unknown -> memory 0.6/2.0 = 30 %, unknown 0.4/2.0 = 20 %
    assert "|L2||30.0%||50.0%||20.0%|" in text
    assert "1 kernel run above a roof by more than 5%" in text
    assert "run.csv" in text and "abababababababab" in text  # the input and its sha256 prefix


def test_bound_shares_frame(report: pd.DataFrame) -> None:
    s = html.bound_shares(report)
    assert list(s.index) == ["dram", "l2", "l1"]
    # softmax+copy; gemm+bogus; mystery
    np.testing.assert_allclose(s.loc["l1"].to_numpy(float), [0.35, 0.55, 0.10])


def test_machine_citations_from_the_metadata_are_listed(report: pd.DataFrame) -> None:
    meta = {"ceilings": [{"label": "spec:GPU-A",
                          "sources": {"bandwidth_bytes_per_s.dram": "GPU-A datasheet p. 3"}},
                         {"label": "spec:Other", "sources": {"peak_flop_per_s.fp32": "unused"}}]}
    text = html.render(report, metadata=meta, with_charts=False)
    assert "GPU-A datasheet p. 3" in text and "unused" not in text


# -------------------------------------------------------------------------------------- escaping


def test_everything_from_the_report_is_escaped() -> None:
    df = make_report([kernel(0, "evil<T>&co", 1e-3, 1e9, {"dram": 1e8, "l2": 1e8, "l1": 1e8},
                             kernel_name=EVIL, nvtx_path="a<b>/c&d", source='x"y.csv')])
    text = html.render(df)
    assert "<script>alert" not in text
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in text
    p = Page(text)
    assert p.column("kernel") == ["evil<T>&co"]
    assert p.rows[0]["titles"][1] == EVIL  # type: ignore[index]  # round-trips exactly through the title
    assert p.column("source") == ['x"y.csv']
    assert p.groups[0].startswith("a<b>/c&d — ")
    assert p.scripts == [{}]


# ---------------------------------------------------------------------------------- determinism


def test_same_report_same_bytes(report: pd.DataFrame, page_text: str) -> None:
    shuffled = report.sample(frac=1.0, random_state=7)
    again = html.render(shuffled, metadata={"nsroof_version": "0.1.0", "schema_version": "1",
                                            "inputs": [{"name": "run.csv", "sha256": "ab" * 32}]})
    assert again == page_text


def test_a_long_run_lists_its_longest_kernels_and_says_so(report: pd.DataFrame) -> None:
    text = html.render(report, with_charts=False, max_rows=3)
    p = Page(text)
    assert p.column("kernel") == ["gemm", "copy", "mystery"]  # 1 ms, 0.5 ms, 0.2 ms (id 2 before id 3)
    # 1.0 + 0.5 + 0.2 = 1.7 of 2.0 ms
    assert "The 3 longest of the report's 5 kernels are listed (85.0% of the kernel time)" in text
    assert '<span id="shown">3</span> of 5 kernels shown' in text
    # the groups count the rows listed; their share stays of the whole run's time
    assert p.groups == ["model/layer1 — 2 kernel(s), 75.0% of time",
                        "model/layer2 — 1 kernel(s), 10.0% of time"]
    every = html.render(report, with_charts=False, max_rows=0)
    assert len(Page(every).rows) == 5 and "longest of the report" not in every
    assert html.render(report, with_charts=False) == html.render(report, with_charts=False, max_rows=5)


# -------------------------------------------------------------------------------------------- CLI


_nsroof, _invoke = nsroof_process, invoke


def test_cli_writes_the_page_and_refuses_bad_input(report: pd.DataFrame, tmp_path: Path) -> None:
    from nsroof.report import parquet

    path = parquet.write(report, tmp_path / "report.parquet", inputs=[])
    r = _nsroof("report", str(path), "-o", str(tmp_path / "r.html"))
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith(f"wrote {tmp_path / 'r.html'}: 5 kernels, ")
    assert len(Page((tmp_path / "r.html").read_text()).rows) == 5
    r = _nsroof("report", str(path), "-o", str(tmp_path / "top2.html"), "--rows", "2")
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith(f"wrote {tmp_path / 'top2.html'}: 5 kernels (the 2 longest in its table), ")
    assert len(Page((tmp_path / "top2.html").read_text()).rows) == 2
    for args, message in (
        ((str(path), "-o", str(tmp_path / "r.txt")), "cannot write an HTML report as '.txt'"),
        ((str(tmp_path / "none.parquet"), "-o", str(tmp_path / "x.html")), "no such file or directory"),
    ):
        code, _, err = _invoke("report", *args)
        assert code == 2 and err.startswith("nsroof: error: ") and message in err
        assert "Traceback" not in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "x.html").exists() and not list(tmp_path.glob(".*.tmp"))


def test_an_empty_report_still_gives_a_page(report: pd.DataFrame) -> None:
    p = Page(html.render(report.iloc[0:0]))
    assert p.rows == [] and p.tags["svg"] == 1  # the (empty) hierarchical chart, no per-level charts


def test_emit_nvtx_counters_do_not_split_groups() -> None:
    assert html.group_path("train/aten::linear, seq = 8, op_id = 27/aten::mm, seq = 8, op_id = 28, "
                           "sizes = [[2]]") \
        == "train/aten::linear/aten::mm"
    assert html.group_path("") == "" and html.group_path("a/b") == "a/b"
    df = make_report([
        kernel(0, "gemm", 1e-3, 1e9, {"dram": 1e8, "l2": 1e8, "l1": 1e8},
               nvtx_path="fc1/aten::mm, seq = 1, op_id = 5"),
        kernel(1, "gemm", 1e-3, 1e9, {"dram": 1e8, "l2": 1e8, "l1": 1e8},
               nvtx_path="fc1/aten::mm, seq = 2, op_id = 9"),
    ])
    p = Page(html.render(df, with_charts=False))
    assert p.groups == ["fc1/aten::mm — 2 kernel(s), 100.0% of time"]
    assert [r["attrs"]["title"] for r in p.rows] == [  # type: ignore[index]
        "NVTX: fc1/aten::mm, seq = 1, op_id = 5", "NVTX: fc1/aten::mm, seq = 2, op_id = 9"]


# ------------------------------------------------------------------------------------------- overview


def _dram_only(frame: pd.DataFrame) -> pd.DataFrame:
    """A trace or CPU profile: one row per kernel, at DRAM."""
    return frame[frame["level"] == "dram"].reset_index(drop=True)


def test_the_page_opens_on_the_overview_with_categories_summing_to_the_run(page_text: str) -> None:
    overview = page_text.index('<section id="overview">')
    assert overview < page_text.index("<h2>Run</h2>") < page_text.index('<details id="calls">')
    section = page_text[overview:page_text.index("</section>", overview)]
    # five_kernels: 2.0 ms; GEMM 1 ms (50%, headroom 1.0 / 0.5 = 2), elementwise (copy) 0.5 ms (25%)
    assert "Σ 2 ms, the run's time" in section
    assert re.search(r"<td>GEMM</td><td class=\"n\">1</td><td class=\"n\">1 ms</td><td class=\"n\">50.0%</td>"
                     r"<td class=\"compute\">compute</td><td class=\"n\"[^>]*>2×</td>", section)
    assert "<td>elementwise</td>" in section and "Top 5 ops by time" in section


def test_ops_and_modules_with_their_shapes(tmp_path: Path) -> None:
    frame = _dram_only(make_report([
        kernel(0, "sgemm", 3e-3, 1e9, {"dram": 1e8, "l2": 1e8, "l1": 1e8}, op="aten::mm",
               input_shapes="[[8, 16], [16, 32]]", module="net.fc1", category="GEMM"),
        kernel(1, "sgemm", 1e-3, 1e9, {"dram": 1e8, "l2": 1e8, "l1": 1e8}, op="aten::mm",
               input_shapes="[[8, 16], [16, 32]]", module="net.fc1", category="GEMM"),
        kernel(2, "relu", 1e-3, 1e6, {"dram": 1e6, "l2": 1e6, "l1": 1e6}, op="aten::relu",
               input_shapes="[[8, 32]]", module="net.act", category="elementwise"),
    ]))
    text = html.render(frame)
    ops = text[text.index('<h2 id="ops">'):text.index('<h2 id="modules">')]
    # the two aten::mm calls of one shape: one row, 4 ms, 2 kernels
    assert ("<td class=\"k\">aten::mm</td><td class=\"shape\">[[8, 16], [16, 32]]</td><td class=\"k\">net.fc1"
            "</td><td>GEMM</td><td class=\"n\">2</td><td class=\"n\">4 ms</td>") in ops
    modules = text[text.index('<h2 id="modules">'):]
    assert modules.index("net.fc1") < modules.index("net.act")


def test_levels_only_where_the_report_has_them() -> None:
    """A DRAM-only report (a trace, a CPU run) shows no L2 or L1 column."""
    page = Page(html.render(_dram_only(five_kernels())))
    assert "DRAM" in page.headers and "L2" not in page.headers and "L1" not in page.headers
    assert {"L2", "L1"} <= set(Page(html.render(five_kernels())).headers)


def test_the_per_call_table_is_capped_and_folded() -> None:
    """A long run's page lists MAX_TABLE_ROWS calls (the old page listed 5000: 7.4 MB for a 2-layer model)."""
    many = _dram_only(make_report([kernel(i, f"k{i % 7}", 1e-6 * (i + 1), 1e6, {"dram": 1e6, "l2": 1e6,
                                                                                "l1": 1e6})
                                   for i in range(html.MAX_TABLE_ROWS + 50)]))
    page = Page(html.render(many, with_charts=False))
    assert len(page.rows) == html.MAX_TABLE_ROWS == 200
