"""A compiled run against an eager one (`nsroof compare eager.parquet compiled.parquet`): like with like by
module and kind of op, since their rows are not the same calls.

An eager run's rows are op calls (aten::linear, aten::pow, aten::mean, …); a torch.compile'd run's are
Inductor's fused kernels (one kernel for a norm's five ops and the residual add beside it) and the extern
calls it keeps (aten::mm, the attention kernel). Matched by function name + NVTX path, almost nothing pairs
up. So when either side holds fused kernels (a row costed by the ``inductor-fused`` formula,
nsroof.costs.fused_kernels), every costed row is keyed by

  * its kind of op: ``matmul`` (the GEMM formulas), ``attention``, ``convolution``, else ``fused /
    elementwise`` (what Inductor fuses: pointwise ops, reductions, norms, softmax, embedding);
  * its module, rolled up to the compiled side's module of that kind it lies in: a fused kernel takes the
    module where its ops' modules meet (``Llama.layers.0`` for a post-norm fused with the residual add), so
    the eager run's ``Llama.layers.0.post_norm`` rows go to the same key.

Rows with no cost (views, autograd bookkeeping, torch.compile's wrappers) carry no work to compare: they
are left out and counted, never added as 0 bytes.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

FUSED_FORMULA = "inductor-fused"
KINDS = (("matmul", ("gemm", "gemm-bias", "bmm", "linear", "grouped-gemm")),
         ("attention", ("attention", "attention-backward", "attention-traffic")),
         ("convolution", ("conv2d", "conv2d-backward", "convolution", "convolution-backward")))
ELEMENTWISE = "fused / elementwise"


@dataclass
class Keyed:
    """Both reports keyed by module and kind (their costed rows), and what was left out."""

    before: pd.DataFrame
    after: pd.DataFrame
    uncosted: tuple[int, int]  # rows left out of each side: no cost
    rows: tuple[int, int]  # costed rows of each side


def formulas(report: pd.DataFrame) -> pd.Series:
    """The ledger formula of each row ('' where none): its bytes_source 'analytic:<formula>'."""
    if "bytes_source" not in report:
        return pd.Series("", index=report.index, dtype=object)
    src = report["bytes_source"].astype(object).where(report["bytes_source"].notna(), "").astype(str)
    return src.where(src.str.startswith("analytic:"), "").str.removeprefix("analytic:")


def is_compiled(report: pd.DataFrame) -> bool:
    """Whether a report holds Inductor's fused kernels, costed from the ops they fused."""
    return bool((formulas(report) == FUSED_FORMULA).any())


def kind_of(formula: pd.Series) -> pd.Series:
    out = pd.Series(ELEMENTWISE, index=formula.index, dtype=object)
    for kind, names in KINDS:
        out[formula.isin(names)] = kind
    return out


def keyed(before: pd.DataFrame, after: pd.DataFrame) -> Keyed:
    """Each side's costed rows with `function` = its kind and `nvtx_path` = its rolled-up module (see the
    module docstring), the compiled side's modules the granularity (both compiled: each its own)."""
    sides = []
    for report in (before, after):
        costed = report[formulas(report) != ""].copy()
        costed["kind_"] = kind_of(formulas(costed))
        costed["module_"] = costed["module"].astype(object).where(costed["module"].notna(), "").astype(str) \
            if "module" in costed else ""
        sides.append(costed)
    compiled = [is_compiled(r) for r in (before, after)]
    coarse: dict[str, set[str]] = {}
    for side, is_c in zip(sides, compiled, strict=True):
        if is_c:
            for kind, module in zip(side["kind_"], side["module_"], strict=True):
                coarse.setdefault(kind, set()).add(module)
    out = []
    for side in sides:
        side["function"] = side["kind_"]
        side["nvtx_path"] = [_rolled(m, coarse.get(k, set())) for k, m in zip(side["kind_"], side["module_"],
                                                                               strict=True)]
        out.append(side.drop(columns=["kind_", "module_"]))
    return Keyed(out[0], out[1], (_calls(before) - _calls(out[0]), _calls(after) - _calls(out[1])),
                 (_calls(out[0]), _calls(out[1])))


def _calls(report: pd.DataFrame) -> int:
    """Rows of a report counted once per kernel or op call (a GPU report repeats each at every level)."""
    return int((report["level"].astype(str) == "dram").sum()) if "level" in report else len(report)


def _rolled(module: str, coarse: set[str]) -> str:
    """The longest module of `coarse` that is `module` or encloses it; `module` itself when none does."""
    parts = module.split(".") if module else []
    for n in range(len(parts), 0, -1):
        prefix = ".".join(parts[:n])
        if prefix in coarse:
            return prefix
    return module


def matched_rows(k: Keyed) -> tuple[float, float]:
    """The share of each side's costed rows whose key the other side has too."""
    sides = [s[s["level"].astype(str) == "dram"] if "level" in s else s for s in (k.before, k.after)]
    keys = [set(zip(s["function"], s["nvtx_path"], strict=True)) for s in sides]
    shares = []
    for side, other in ((sides[0], keys[1]), (sides[1], keys[0])):
        hit = np.fromiter(((f, p) in other for f, p in zip(side["function"], side["nvtx_path"], strict=True)),
                          dtype=bool, count=len(side))
        shares.append(float(hit.mean()) if len(side) else float("nan"))
    return shares[0], shares[1]
