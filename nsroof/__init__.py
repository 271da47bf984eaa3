"""nsroof: hierarchical roofline analysis for PyTorch workloads and Nsight Compute exports.

Importing nsroof has no side effects: heavy modules (pandas, torch, nvtx, matplotlib) load
only when the function that needs them is called.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from nsroof._version import __version__

# Public name -> "module:attribute", resolved on first access (PEP 562).
_LAZY: dict[str, str] = {
    "load": "nsroof.report.parquet:load",
    "analyze": "nsroof.pipeline:analyze",
    "analyze_many": "nsroof.dataset:analyze_many",
    "annotate": "nsroof.collectors.nvtx_ranges:annotate",
    "annotate_modules": "nsroof.collectors.nvtx_ranges:annotate_modules",
    "step": "nsroof.collectors.nvtx_ranges:step",
    "profile": "nsroof.collectors.torch_profile:profile",
    "plot": "nsroof.report.plots:plot",
    "formula": "nsroof.models.ledger.custom:formula",
    "Tensor": "nsroof.models.ledger.custom:Tensor",
    "Term": "nsroof.models.ledger.core:Term",
    "Missing": "nsroof.models.ledger.custom:Missing",
}

__all__ = ["__version__", *_LAZY]

if TYPE_CHECKING:  # pragma: no cover
    from nsroof.report.parquet import load as load  # noqa: F401


def __getattr__(name: str) -> Any:
    target = _LAZY.get(name)
    if target is None:
        raise AttributeError(f"module 'nsroof' has no attribute {name!r}")
    import importlib

    module_name, attr = target.split(":")
    value = getattr(importlib.import_module(module_name), attr)
    globals()[name] = value
    return value
