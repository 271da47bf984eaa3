"""The HTML report in a real browser: headless Chromium (Debian's `chromium` package) loads the page,
runs its script, and the DOM it dumps has one row per kernel, drawn charts, and working filters and
sorting. Skipped where chromium is not installed, except under NSROOF_REQUIRE_BROWSER=1 (.ci/run sets
it after installing Chromium), where a missing browser fails; the screenshot lands in test-artifacts/."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from nsroof.report import html
from tests._paths import REPO
from tests.report.page_parse import Page
from tests.report.report_frames import five_kernels

ARTIFACTS = REPO / "test-artifacts"
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")

if CHROMIUM is None and os.environ.get("NSROOF_REQUIRE_BROWSER") == "1":
    raise RuntimeError("NSROOF_REQUIRE_BROWSER=1 but chromium is not installed (apt-get install -y chromium)")
pytestmark = pytest.mark.skipif(CHROMIUM is None,
                                reason="chromium not installed (apt-get install -y chromium)")

# --no-sandbox: containers run as root, where Chromium's sandbox refuses to start
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", "--no-first-run",
         "--disable-extensions", "--disable-background-networking"]


@pytest.fixture(scope="module")
def page_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("html") / "report.html"
    html.write(five_kernels(), path)
    return path


def _dom(url: str) -> Page:
    assert CHROMIUM is not None
    out = subprocess.run([CHROMIUM, *FLAGS, "--dump-dom", url], capture_output=True, text=True, timeout=90)
    assert out.returncode == 0, out.stderr[-2000:]
    return Page(out.stdout)


def _shown(p: Page) -> list[str]:
    i = p.headers.index("kernel")
    return [r["cells"][i] for r in p.rows if "hidden" not in r["attrs"]]  # type: ignore[index,operator]


def _raw_dom(url: str) -> str:
    assert CHROMIUM is not None
    out = subprocess.run([CHROMIUM, *FLAGS, "--dump-dom", url], capture_output=True, text=True, timeout=90)
    assert out.returncode == 0, out.stderr[-2000:]
    return out.stdout


def _points(dom: str) -> tuple[list[str], list[str]]:
    """(ranks of the points shown, ranks of the points hidden) over every chart of the page."""
    tags = re.findall(r'<a class="pt" data-k="(\d+)"( style="display: none;")?>', dom)
    return [k for k, hidden in tags if not hidden], [k for k, hidden in tags if hidden]


@pytest.fixture(scope="module")
def example_page(example_csv: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    from nsroof.pipeline import analyze

    report = analyze([example_csv])
    path = tmp_path_factory.mktemp("html") / "example.html"
    html.write(report.frame, path, metadata=report.metadata)
    return path


def test_the_browser_draws_one_row_per_kernel_and_the_charts(page_path: Path) -> None:
    dom = _dom(page_path.as_uri())
    assert len(dom.rows) == 5
    assert _shown(dom) == ["gemm", "copy", "mystery", "softmax<float>", "bogus"]
    assert dom.tags["svg"] == 4 and dom.tags["path"] > 20
    assert len(dom.ids) == len(set(dom.ids))


def test_bound_compute_shows_the_compute_bound_kernels_of_the_packaged_example(example_page: Path) -> None:
    # the packaged export's six GEMMs (ampere_bf16_s16816gemm_…) are limited by the tensor roof
    # (`limiting` = compute); every other kernel is memory-bound at DRAM
    dom = _dom(example_page.as_uri() + "#bound=compute")
    shown = _shown(dom)
    assert len(shown) == 6 and all("gemm" in name for name in shown)
    assert len(_shown(_dom(example_page.as_uri() + "#bound=memory"))) == 9


def test_the_filter_drives_the_charts_and_points_carry_tooltips(example_page: Path) -> None:
    everything = _raw_dom(example_page.as_uri())
    shown, hidden = _points(everything)
    assert shown and not hidden
    # one tooltip per point: rank, name, id, level, intensity, FLOP/s and roof fraction, humane numbers
    tip = re.search(r'<a class="pt" data-k="2"[^>]*><title>([^<]*)</title>', everything)
    assert tip is not None
    assert re.fullmatch(r"2\. ampere_bf16_\S+ \(id \d+\) at DRAM: compute-bound, intensity [\d.]+ FLOP/B, "
                        r"[\d.]+ TFLOP/s, [\d.]+% of the roof; [\d.]+ us \([\d.]+% of the time\)",
                        tip.group(1))
    assert not re.search(r"\d{8,}", tip.group(1))  # no raw floats
    dom = _raw_dom(example_page.as_uri() + "#bound=compute")
    shown_c, hidden_c = _points(dom)
    rows = Page(dom)
    compute_ranks = {r["attrs"]["data-k"] for r in rows.rows  # type: ignore[index]
                     if "hidden" not in r["attrs"]}  # type: ignore[operator]
    assert hidden_c and set(shown_c) == compute_ranks


def test_points_of_kernels_the_table_does_not_list(tmp_path: Path) -> None:
    # the table lists the 2 longest kernels: the other kernels' points stay on the charts, and go when a
    # filter is set (their rows, not listed, cannot be matched)
    path = tmp_path / "top2.html"
    html.write(five_kernels(), path, max_rows=2)
    shown, hidden = _points(_raw_dom(path.as_uri()))
    assert not hidden and {"4", "5"} <= set(shown)  # softmax and bogus: ranks 4 and 5, not listed
    shown_f, hidden_f = _points(_raw_dom(path.as_uri() + "#q=gemm"))
    assert set(shown_f) == {"1"} and {"4", "5"} <= set(hidden_f)


def test_filters_run_in_the_browser(page_path: Path) -> None:
    # the script reads the filter from the URL fragment and hides the rest (rows and empty groups)
    assert _shown(_dom(page_path.as_uri() + "#q=layer2")) == ["mystery", "softmax<float>"]
    assert _shown(_dom(page_path.as_uri() + "#q=model&bound=memory")) == ["copy", "softmax<float>"]


def test_sorting_runs_in_the_browser(page_path: Path) -> None:
    # sorted by kernel name inside each NVTX group: [gemm, copy] -> [copy, gemm]; [mystery, softmax] stays
    assert _shown(_dom(page_path.as_uri() + "#sort=kernel")) == ["copy", "gemm", "mystery", "softmax<float>",
                                                                 "bogus"]
    desc = _shown(_dom(page_path.as_uri() + "#sort=share&dir=desc"))
    assert desc == ["gemm", "copy", "mystery", "softmax<float>", "bogus"]


def test_screenshot(page_path: Path) -> None:
    assert CHROMIUM is not None
    ARTIFACTS.mkdir(exist_ok=True)
    shot = ARTIFACTS / "report.png"
    shot.unlink(missing_ok=True)
    out = subprocess.run([CHROMIUM, *FLAGS, "--window-size=1300,2400", f"--screenshot={shot}",
                          page_path.as_uri()],
                         capture_output=True, text=True, timeout=90)
    assert out.returncode == 0, out.stderr[-2000:]
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and shot.stat().st_size > 50_000


_PROBE = ("<script>(function(){var o=document.getElementById('overview').getBoundingClientRect();"
          "var k=document.getElementById('kernels');"
          "document.body.setAttribute('data-probe',[o.top<innerHeight,k.checkVisibility(),"
          "document.getElementById('calls').open].join(' '));})();</script>")


def _probe(page: Path, tmp_path: Path, fragment: str = "") -> list[str]:
    probed = tmp_path / f"probed{len(fragment)}.html"
    probed.write_text(page.read_text(encoding="utf-8").replace("</body>", _PROBE + "</body>"),
                      encoding="utf-8")
    found = re.search(r'data-probe="([^"]*)"', _raw_dom(probed.as_uri() + fragment))
    assert found is not None
    return found.group(1).split()


def test_the_page_opens_on_the_overview(example_page: Path, tmp_path: Path) -> None:
    """In the browser the overview starts on the first screen and the per-call table is folded away (not
    visible); a filter in the link unfolds it."""
    dom = Page(_raw_dom(example_page.as_uri()))
    assert dom.ids[0] == "overview"
    assert _probe(example_page, tmp_path) == ["true", "false", "false"]  # on screen, table hidden, folded
    assert _probe(example_page, tmp_path, "#q=gemm") == ["true", "true", "true"]
