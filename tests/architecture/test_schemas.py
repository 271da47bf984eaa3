"""Every table nsroof passes between layers is the one declared in nsroof.schema, column for column."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pyarrow as pa

from nsroof import importers
from nsroof.models.quantities import derive
from nsroof.schema import IDENTITY_COLUMNS, QUANTITY_FIELDS

EXAMPLE = Path(__file__).resolve().parents[2] / "nsroof" / "data" / "examples" / "example_details.csv"

_PANDAS_KIND = {pa.float64(): "f", pa.string(): "O", pa.bool_(): "b", pa.int64(): "i"}


def test_importers_return_the_declared_identity_columns() -> None:
    kernels, _ = importers.read(EXAMPLE)
    assert list(kernels.columns[: len(IDENTITY_COLUMNS)]) == list(IDENTITY_COLUMNS)


def test_derive_returns_the_declared_quantities_in_order_with_their_types() -> None:
    kernels, _ = importers.read(EXAMPLE)
    quantities = derive(kernels)
    assert list(quantities.columns) == [f.name for f in QUANTITY_FIELDS]
    kinds = {f.name: _PANDAS_KIND[f.type] for f in QUANTITY_FIELDS}
    assert {c: quantities[c].dtype.kind for c in quantities.columns} == kinds


def test_derive_of_no_kernels_still_has_every_declared_column() -> None:
    quantities = derive(pd.DataFrame({"cc": pd.Series([], dtype=object)}))
    assert list(quantities.columns) == [f.name for f in QUANTITY_FIELDS]
