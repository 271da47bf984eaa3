"""The chart's geometry: axis limits that hold every point and roof, where each top-N label goes so it
covers the fewest markers and other labels, and the on-screen angle of a bandwidth roof. Pure arithmetic
on display coordinates; nsroof.report.plots draws what these return."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

if TYPE_CHECKING:  # pragma: no cover
    from matplotlib.axes import Axes

def limits(data: pd.DataFrame, roofs: pd.DataFrame,
           ridges: pd.DataFrame) -> tuple[float, float, float, float]:
    pts = data[data["plotted"]]
    xs = np.concatenate([pts["x_intensity"].to_numpy(float), ridges["x_ridge"].to_numpy(float)])
    peaks = roofs.loc[roofs["kind"] == "compute", "value_max"].to_numpy(float)
    ys = np.concatenate([pts["y_flop_per_s"].to_numpy(float), peaks])
    if xs.size == 0:
        xs = np.array([0.1, 100.0])
    if ys.size == 0:
        bws = roofs.loc[roofs["kind"] == "bandwidth", "value_max"].to_numpy(float)
        ys = np.concatenate([bws * xs.min(), bws * xs.max()]) if bws.size else np.array([1e9, 1e13])
    x_lo = 10 ** math.floor(math.log10(xs.min()) - 0.5)
    x_hi = 10 ** math.ceil(math.log10(xs.max()) + 0.3)
    y_lo = 10 ** math.floor(math.log10(ys.min()) - 0.3)
    y_hi = 10 ** (math.log10(ys.max()) + 0.45)
    return x_lo, x_hi, y_lo, y_hi



_LABEL_PT = 7.5
#: how far a label may move away from its marker, in label heights (a leader line joins it when moved)
_LABEL_STEPS = 5


def _label_candidates(cx: float, cy: float, gap: float, w: float,
                      h: float) -> list[tuple[int, int, int, float, float]]:
    """(sx, sy, step, anchor x, anchor y) for every spot a label may take around its marker: beside it
    (left/right), or above/below it (right-, left- or centre-aligned), stepped away one label height
    at a time."""
    out = [(1, 0, 0, cx + gap, cy), (-1, 0, 0, cx - gap, cy)]
    for step in range(_LABEL_STEPS):
        for sy in (1, -1):
            ay = cy + sy * (gap * 0.75 + step * h * 1.15)
            out += [(1, sy, step, cx + gap * 0.75, ay), (-1, sy, step, cx - gap * 0.75, ay),
                    (0, sy, step, cx, ay)]
    return out


def place_labels(ax: Axes, pts: pd.DataFrame, *, gid_prefix: str | None = None) -> None:
    """Put each top-N label near its marker where it covers the fewest markers, earlier labels and the
    roof labels already drawn (greedy, in rank order, so the longest kernels get the best spots;
    deterministic). A label moved away from its marker gets a thin leader line. With `gid_prefix`, each
    label's SVG group id is the prefix + its kernel key in hex (the HTML page hides it with its point)."""
    labelled = pts[pts["label"] != ""]
    if labelled.empty:
        return
    fig = ax.get_figure()
    assert fig is not None
    px_per_pt = fig.dpi / 72.0
    xy = ax.transData.transform(np.column_stack([pts["x_intensity"].to_numpy(float),
                                                 pts["y_flop_per_s"].to_numpy(float)]))
    radius = np.sqrt(pts["marker_area_pt2"].to_numpy(float) / math.pi) * px_per_pt
    markers = np.column_stack([xy[:, 0] - radius, xy[:, 1] - radius, xy[:, 0] + radius, xy[:, 1] + radius])
    labels = _text_boxes(ax, px_per_pt)
    frame = ax.get_window_extent()
    for row in labelled.itertuples():
        i = pts.index.get_loc(row.Index)
        cx, cy = xy[i]
        text = f"{row.rank}. {row.label}"
        w = 0.6 * _LABEL_PT * len(text) * px_per_pt
        h = 1.3 * _LABEL_PT * px_per_pt
        gap = radius[i] + 3 * px_per_pt
        best: tuple[float, tuple[int, int, int, float, float],
                    tuple[float, float, float, float]] | None = None
        for cand in _label_candidates(cx, cy, gap, w, h):
            sx, sy, step, ax0, ay0 = cand
            x0 = ax0 if sx > 0 else (ax0 - w if sx < 0 else ax0 - w / 2)
            y0 = ay0 if sy > 0 else (ay0 - h if sy < 0 else ay0 - h / 2)
            box = (x0, y0, x0 + w, y0 + h)
            cost = float(_overlaps(box, markers).sum() - _overlap(box, tuple(markers[i])))
            cost += 3 * float(_overlaps(box, labels).sum())
            cost += 4 * (w * h - _overlap(box, (frame.x0, frame.y0, frame.x1, frame.y1)))
            cost += 0.05 * w * h * step  # nearer is better when the overlap is the same
            if best is None or cost < best[0] - 1e-9:
                best = (cost, cand, box)
        assert best is not None
        (sx, sy, step, ax0, ay0), box = best[1], best[2]
        labels = np.vstack([labels, np.array(box)[None, :]])
        leader = {"arrowstyle": "-", "color": "#999999", "linewidth": 0.6, "shrinkA": 0, "shrinkB": 0} \
            if step > 0 else None
        note = ax.annotate(text, (row.x_intensity, row.y_flop_per_s),
                    xytext=((ax0 - cx) / px_per_pt, (ay0 - cy) / px_per_pt), textcoords="offset points",
                    fontsize=_LABEL_PT, ha={1: "left", -1: "right", 0: "center"}[sx],
                    va={1: "bottom", -1: "top", 0: "center"}[sy], zorder=8, arrowprops=leader,
                    bbox={"boxstyle": "round,pad=0.15", "fc": "white", "ec": "none", "alpha": 0.75})
        if gid_prefix is not None:
            note.set_gid(f"{gid_prefix}{str(row.key).encode().hex()}")


def _text_boxes(ax: Axes, px_per_pt: float) -> np.ndarray:
    """Display boxes of the horizontal texts already on the axes (the compute roofs' labels), estimated as
    the labels are (0.6 em per character), so a kernel label avoids them."""
    boxes = []
    for text in ax.texts:
        if text.get_rotation() != 0 or not text.get_text():
            continue
        x, y = ax.transData.transform(text.get_position())
        size = float(text.get_fontsize())
        lines = text.get_text().split("\n")
        w = 0.6 * size * max(len(s) for s in lines) * px_per_pt
        h = 1.3 * size * len(lines) * px_per_pt
        x0 = {"left": x, "right": x - w}.get(text.get_horizontalalignment(), x - w / 2)
        y0 = {"bottom": y, "top": y - h}.get(text.get_verticalalignment(), y - h / 2)
        boxes.append((x0, y0, x0 + w, y0 + h))
    return np.array(boxes, dtype=float).reshape(-1, 4)


def _overlaps(box: tuple[float, float, float, float], boxes: np.ndarray) -> np.ndarray:
    w = np.minimum(box[2], boxes[:, 2]) - np.maximum(box[0], boxes[:, 0])
    h = np.minimum(box[3], boxes[:, 3]) - np.maximum(box[1], boxes[:, 1])
    return np.where((w > 0) & (h > 0), w * h, 0.0)


def _overlap(a: tuple[float, float, float, float], b: tuple[float, float, float, float]) -> float:
    w = min(a[2], b[2]) - max(a[0], b[0])
    h = min(a[3], b[3]) - max(a[1], b[1])
    return w * h if w > 0 and h > 0 else 0.0


