"""nsroof: hierarchical roofline analysis for PyTorch workloads and Nsight Compute exports.

    import nsroof
    report = nsroof.analyze("run.ncu-rep")          # or nsroof.load("report.parquet")
    print(nsroof.summary(report))
    nsroof.plot(report, "roofline.png"); nsroof.html(report, "report.html")
    with nsroof.profile(machine="h100-sxm") as prof:     # torch.profiler around a region
        step()
    prof.report                                     # the same Report type

Importing nsroof has no side effects: heavy modules (pandas, torch, nvtx, matplotlib) load only when
the function that needs them is called (PEP 562 lazy attributes).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from nsroof._version import __version__

# Public name -> "module:attribute", resolved on first access.
_LAZY: dict[str, str] = {
    "analyze": "nsroof.api:analyze",
    "load": "nsroof.api:load",
    "summary": "nsroof.api:summary",
    "plot": "nsroof.api:plot",
    "html": "nsroof.api:html",
    "profile": "nsroof.api:profile",
    "Report": "nsroof.pipeline:Report",
    "NsroofError": "nsroof.errors:NsroofError",
    "analyze_many": "nsroof.dataset:analyze_many",
    "annotate": "nsroof.collectors.nvtx_ranges:annotate",
    "annotate_modules": "nsroof.collectors.nvtx_ranges:annotate_modules",
    "step": "nsroof.collectors.nvtx_ranges:step",
    "formula": "nsroof.costs.ledger.custom:formula",
    "Tensor": "nsroof.costs.ledger.custom:Tensor",
    "Term": "nsroof.costs.ledger.core:Term",
    "Missing": "nsroof.costs.ledger.custom:Missing",
}

__all__ = ["__version__", *_LAZY]

if TYPE_CHECKING:  # pragma: no cover  (type checkers and IDEs see the real signatures)
    from nsroof.api import analyze as analyze
    from nsroof.api import html as html
    from nsroof.api import load as load
    from nsroof.api import plot as plot
    from nsroof.api import profile as profile
    from nsroof.api import summary as summary
    from nsroof.collectors.nvtx_ranges import annotate as annotate
    from nsroof.collectors.nvtx_ranges import annotate_modules as annotate_modules
    from nsroof.collectors.nvtx_ranges import step as step
    from nsroof.costs.ledger.core import Term as Term
    from nsroof.costs.ledger.custom import Missing as Missing
    from nsroof.costs.ledger.custom import Tensor as Tensor
    from nsroof.costs.ledger.custom import formula as formula
    from nsroof.dataset import analyze_many as analyze_many
    from nsroof.errors import NsroofError as NsroofError
    from nsroof.pipeline import Report as Report


def __getattr__(name: str) -> Any:
    target = _LAZY.get(name)
    if target is None:
        raise AttributeError(f"module 'nsroof' has no attribute {name!r}")
    import importlib

    module_name, attr = target.split(":")
    value = getattr(importlib.import_module(module_name), attr)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)
