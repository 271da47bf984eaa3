"""`nsroof compare A B --html OUT.html` (nsroof.report.compare_html): the comparison as a side-by-side page —
totals, matched and one-sided kernels counted, time, FLOPs, DRAM bytes and bound before and after per kernel
and per NVTX range — checked as text and, where Chromium is installed, in the browser (sorting works)."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest
from click.testing import CliRunner

from nsroof.cli import cli
from nsroof.report import compare, compare_html
from tests.report.report_frames import kernel, make_report

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
OLD = "old&lt;float&gt;"  # the kernel only before, as the page escapes its name
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", "--no-first-run",
         "--disable-extensions", "--disable-background-networking"]


def _pair() -> tuple[object, object]:
    """Before: gemm 2 ms, softmax 1 ms, <old> 0.5 ms. After: gemm 1 ms (2× faster, its DRAM bytes halved so
    it turns compute-bound), softmax 1 ms, <new> 0.25 ms. <old> and <new> are on one side only."""
    # gemm before: 4e9 FLOP over 1e9 DRAM bytes = 4 FLOP/B < ridge 10: memory; after 4e9 / 2e8 = 20: compute
    before = make_report([
        kernel(1, "gemm", 2e-3, 4e9, {"dram": 1e9, "l2": 2e9, "l1": 4e9}, nvtx_path="train/fwd"),
        kernel(2, "softmax", 1e-3, 1e6, {"dram": 1e8, "l2": 1e8, "l1": 1e8}, nvtx_path="train/fwd"),
        kernel(3, "old<float>", 5e-4, 1e6, {"dram": 1e7, "l2": 1e7, "l1": 1e7}, nvtx_path="train/bwd"),
    ])
    after = make_report([
        kernel(1, "gemm", 1e-3, 4e9, {"dram": 2e8, "l2": 2e9, "l1": 4e9}, nvtx_path="train/fwd"),
        kernel(2, "softmax", 1e-3, 1e6, {"dram": 1e8, "l2": 1e8, "l1": 1e8}, nvtx_path="train/fwd"),
        kernel(4, "new_kernel", 2.5e-4, 1e6, {"dram": 1e7, "l2": 1e7, "l1": 1e7}, nvtx_path="train/bwd"),
    ])
    return before, after


def _page(tmp_path: Path) -> Path:
    before, after = _pair()
    result = compare.compare(before, after)  # type: ignore[arg-type]
    return compare_html.write(result, tmp_path / "cmp.html", before_name="a.parquet", after_name="b.parquet")


def _rows(text: str, table_id: str) -> list[list[str]]:
    body = text.split(f'id="{table_id}"', 1)[1].split("</table>", 1)[0]
    return [[re.sub(r"<[^>]+>", "", c) for c in re.findall(r"<td[^>]*>(.*?)</td>", row)]
            for row in re.findall(r"<tr>(.*?)</tr>", body.split("<tbody>", 1)[1])]


def test_the_page_shows_both_sides_per_kernel_and_counts_the_unmatched(tmp_path: Path) -> None:
    text = _page(tmp_path).read_text(encoding="utf-8")
    assert "<script src" not in text and "http" not in text.split("<body>", 1)[1]  # self-contained
    assert "old&lt;float&gt;" in text  # escaped
    assert "2 matched" not in text and ">2</td>" in text  # kernels matched, both columns
    assert "1 only before" in text and "1 only after" in text
    # time 3.5 ms -> 2.25 ms: 3.5 / 2.25 = 1.56x
    assert "3.5 ms" in text and "2.25 ms" in text and "1.56x" in text
    rows = {r[0]: r for r in _rows(text, "compare-kernels")}
    gemm = rows["gemm"]
    # time 2 ms -> 1 ms (-1 ms, 2.00x); FLOPs 4 GFLOP both; DRAM bytes 1e9 B = 953.7 MiB -> 2e8 B = 190.7 MiB
    assert gemm[1:8] == ["fwd", "matched", "2 ms", "1 ms", "-1 ms", "2.00x", "4 GFLOP"]
    assert gemm[9:] == ["953.7 MiB", "190.7 MiB", "memory", "compute"]
    assert rows["old&lt;float&gt;"][2] == "only before" and rows["new_kernel"][2] == "only after"
    assert rows["new_kernel"][3] == "—"  # nothing before
    ranges = {r[0].replace("\u00a0", ""): r for r in _rows(text, "compare-ranges")}
    assert ranges["train"][1:5] == ["3.5 ms", "2.25 ms", "-1.25 ms", "1.56x"]


def test_compare_html_writes_the_page_from_the_command(tmp_path: Path) -> None:
    before, after = _pair()
    a, b = tmp_path / "a.parquet", tmp_path / "b.parquet"
    before.to_parquet(a)  # type: ignore[attr-defined]
    after.to_parquet(b)  # type: ignore[attr-defined]
    out = tmp_path / "diff.html"
    result = CliRunner().invoke(cli, ["compare", str(a), str(b), "--html", str(out)])
    assert result.exit_code == 0, result.output
    assert "compare " in result.output and out.is_file() and 'id="compare-kernels"' in out.read_text()
    bad = CliRunner().invoke(cli, ["compare", str(a), str(b), "--html", str(tmp_path / "diff.txt")])
    assert bad.exit_code == 2 and not (tmp_path / "diff.txt").exists()


@pytest.mark.skipif(CHROMIUM is None, reason="chromium not installed (apt-get install -y chromium)")
def test_the_browser_sorts_the_kernel_table(tmp_path: Path) -> None:
    page = _page(tmp_path)
    assert CHROMIUM is not None
    # the page as loaded: largest time change first (gemm -1 ms, then old -0.5 ms, new +0.25 ms, softmax 0)
    dom = subprocess.run([CHROMIUM, *FLAGS, "--dump-dom", page.as_uri()], capture_output=True, text=True,
                         timeout=90).stdout
    assert [r[0] for r in _rows(dom, "compare-kernels")] == ["gemm", OLD, "new_kernel", "softmax"]
    # a click on "time after" sorts ascending by its data-v (a kernel without a side sorts last)
    sorter = page.with_name("sorted.html")
    sorter.write_text(page.read_text().replace(
        "</body>", "<script>document.querySelector('#compare-kernels thead th:nth-child(5)').click()"
                   "</script></body>"))
    dom = subprocess.run([CHROMIUM, *FLAGS, "--dump-dom", sorter.as_uri()], capture_output=True, text=True,
                         timeout=90).stdout
    assert [r[0] for r in _rows(dom, "compare-kernels")] == ["new_kernel", "gemm", "softmax", OLD]
