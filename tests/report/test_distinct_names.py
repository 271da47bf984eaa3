"""Issue 41, "Names and tables": on a real profiled run with long op and module names, no two distinct ops
(or modules) print the same name in any table of either summary, at 80 and at 200 columns — names are cut
in the middle, fitted to the width, and where two cut forms coincide the part that tells them apart is shown
(nsroof.names.kernel_names.fit_names)."""

from __future__ import annotations

import re
from collections import defaultdict

import pytest

from nsroof.names.kernel_names import fit_name, fit_names
from nsroof.roofs.machines import Machine

torch = pytest.importorskip("torch")

pytestmark = pytest.mark.usefixtures("one_thread")

MACHINE = Machine(name="test-cpu", source="file", peak_flop_per_s={"fp32": 1e11},
                  simt_flop_per_s={"fp32": 1e11}, bandwidth_bytes_per_s={"dram": 1e10})


def _run() -> object:
    """A forward and backward pass through modules with long qualified names and ops whose names differ in
    the middle (`aten::upsample_bilinear2d_backward` / `aten::upsample_nearest2d_backward`) or only by a
    `_backward` suffix."""
    from torch import nn
    from torch.nn import functional as F

    from nsroof.api import profile

    class ResamplingBlockWithADescriptiveName(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.projection_before_resampling = nn.Conv2d(4, 4, 3, padding=1)
            self.normalization_after_resampling = nn.GroupNorm(2, 4)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            y = self.projection_before_resampling(x)
            y = F.interpolate(y, scale_factor=2, mode="bilinear") + F.interpolate(y, scale_factor=2,
                                                                                    mode="nearest")
            return self.normalization_after_resampling(F.avg_pool2d(y, 2))

    class SegmentationModelWithAVeryLongRootName(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.encoder_stages = nn.ModuleList(ResamplingBlockWithADescriptiveName() for _ in range(3))

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            for stage in self.encoder_stages:
                x = stage(x)
            q = x.flatten(2).transpose(1, 2).reshape(2, 2, -1, 2).contiguous()
            return F.scaled_dot_product_attention(q, q, q).sum() + x.sum()

    torch.manual_seed(0)
    model = SegmentationModelWithAVeryLongRootName()
    x = torch.randn(2, 4, 16, 16, requires_grad=True)
    with profile(machine=MACHINE) as prof:
        model(x).backward()
    return prof


@pytest.fixture(scope="module")
def run() -> object:
    return _run()


def _clashes(printed: list[str], full: list[str]) -> dict[str, set[str]]:
    seen: dict[str, set[str]] = defaultdict(set)
    for p, f in zip(printed, full, strict=True):
        seen[p].add(f)
    return {p: fs for p, fs in seen.items() if len(fs) > 1}


TIME = r" +[\d.]+ [mun]?s "


def _table(text: str, title: str) -> tuple[str, list[str]]:
    """The column header and the row lines of the table whose title matches `title` at its start."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if re.match(title, line))
    body = []
    for line in lines[start + 1:]:
        if not line.strip():
            break
        body.append(line)
    header = next(i for i, line in enumerate(body) if re.match(r"\s+(id |op |kernel name )", line))
    return body[header], body[header + 1:]


def _names(header: str, rows: list[str], after_id: bool = False) -> list[str]:
    """The name cells of `rows`: from the name column's start to the next left-aligned column (module,
    input shapes) or, for a name followed by numbers, up to the first number."""
    start = header.index(" op ") + 1 if " op " in header else 2
    nxt = next((header.index(c) for c in (" module", " input shapes") if c in header), None)
    if nxt is not None:
        return [row[start:nxt].rstrip() for row in rows]
    number = r" +\d+ +[\d.]+ [mun]?s " if not after_id and " calls" in header.split("time")[0] else TIME
    out = []
    for row in rows:
        m = re.match(r"(.*?)" + number, row[start:])
        assert m, row
        out.append(m.group(1))
    return out


@pytest.mark.parametrize("width", [80, 200])
def test_the_profile_summary_prints_distinct_ops_and_modules_distinctly(run: object, width: int) -> None:
    from nsroof.collectors.torch_profile import render_summary
    from nsroof.report.op_tables import top_modules, top_ops

    result = run.result  # type: ignore[attr-defined]
    text = render_summary(result, top=40, width=width)
    ops = top_ops(result.report, 40)["op"].tolist()
    header, rows = _table(text, "Top 40 ops by time")
    printed = _names(header, rows)
    assert len(printed) == len(ops) and "aten::upsample_bilinear2d_backward" in ops
    assert not _clashes(printed, ops), _clashes(printed, ops)
    assert all(len(line) <= width for line in rows)
    modules = top_modules(result.report, 5)["module"].tolist()
    mod_rows = text.split("Top modules by time", 1)[1].split("\n\n", 1)[0].splitlines()[1:]
    mod_names = [re.match(r"  (.*?)" + TIME, row).group(1) for row in mod_rows]  # type: ignore[union-attr]
    assert len(mod_names) == len(modules) and not _clashes(mod_names, modules)
    assert any(len(m) > 60 for m in modules)  # the names were long enough to need cutting


@pytest.mark.parametrize("width", [80, 200])
def test_the_analyze_summary_prints_distinct_ops_distinctly(run: object, width: int) -> None:
    from nsroof.report.summary import per_kernel, render

    report = run.report  # type: ignore[attr-defined]
    text = render(report, top=40, width=width)
    ranked = per_kernel(report.frame).sort_values("duration_s", ascending=False, na_position="last").head(40)
    header, rows = _table(text, "Top 40 ops by time")
    assert len(rows) == 40 and all(len(line) <= width for line in rows)
    printed = _names(header, rows, after_id=True)
    assert not _clashes(printed, ranked["function"].astype(str).tolist())
    header, costed = _table(text, r"Top \d+ costed ops")
    assert costed and all(len(line) <= width for line in costed)
    # the op-level table: each printed op name stands for one op, whatever its shapes
    full = set(report.ops["op"].astype(str))  # type: ignore[attr-defined]
    for name in _names(header, costed):
        assert len({f for f in full if _could_be(name, f)}) == 1, name


def _could_be(printed: str, full: str) -> bool:
    """Whether `printed` is a cut form of `full`: its visible pieces in order, anchored at an uncut end."""
    pieces = [p for p in printed.split("…") if p]
    if not pieces:
        return False
    if not printed.startswith("…") and not full.startswith(pieces[0]):
        return False
    if not printed.endswith("…") and not full.endswith(pieces[-1]):
        return False
    at = 0
    for piece in pieces:
        found = full.find(piece, at)
        if found < 0:
            return False
        at = found + len(piece)
    return True


def test_fit_names_shows_where_look_alikes_differ() -> None:
    a, b = "aten::upsample_bilinear2d_backward", "aten::upsample_nearest2d_backward"
    assert fit_name(a, 23) == fit_name(b, 23) == "aten::upsam…2d_backward"  # the plain cut merges them
    shown = fit_names([a, b, "aten::mm"], 23)
    assert shown[2] == "aten::mm" and len(set(shown)) == 3 and all(len(s) <= 23 for s in shown)
    assert _could_be(shown[0], a) and not _could_be(shown[0], b)
    # module paths keep their tail, from a path component: the layer index stays visible
    layers = [f"ModelWithALongRootName.blocks.{i}.attention.output.dense" for i in (1, 11)]
    assert fit_names(layers, 26, keep="tail") == ["…1.attention.output.dense", "…11.attention.output.dense"]
