"""Numbers written as ncu writes them in each number style the CSV readers accept (for tests that make
files)."""

from __future__ import annotations


def localized(value: float, style: str, decimals: int) -> str:
    """`value` with `decimals` decimals in style "C" (1234.50), "en_US" (1,234.50) or "de_DE" (1.234,50)."""
    text = f"{value:,.{decimals}f}"
    if style == "C":
        return text.replace(",", "")
    if style == "de_DE":
        return text.replace(",", "_").replace(".", ",").replace("_", ".")
    return text
