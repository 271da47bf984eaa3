"""A report written by `nsroof analyze` (a Parquet file or a dataset folder), read back for the commands that
show it (plot, report): its rows and metadata, or one InputError naming the file and the fix."""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

HINT = "give a report written by `nsroof analyze EXPORT -o report.parquet`"


def load_report(path: str | os.PathLike[str], *, filters: Any = None,
                columns: list[str] | None = None) -> tuple[pd.DataFrame, dict[str, Any]]:
    """Rows and metadata of the report at `path` (`filters`/`columns` as nsroof.report.parquet.load takes
    them); anything else is an InputError."""
    import pyarrow as pa

    from nsroof.errors import InputError
    from nsroof.report import parquet
    from nsroof.report.chart_data import check_columns

    path = Path(path)
    if not path.exists():
        raise InputError(path, "no such file or directory", hint=HINT)
    try:
        df = parquet.load(path, filters=filters, columns=columns)
        metadata = parquet.read_metadata(path)
    except (pa.ArrowException, OSError, ValueError) as exc:
        cause = " ".join(str(exc).split())[:200] or type(exc).__name__
        raise InputError(path, f"not a readable Parquet report ({cause})", hint=HINT) from None
    lacking = [] if columns is not None else check_columns(df)
    if lacking:
        raise InputError(path, f"not an nsroof report: lacks the columns {', '.join(lacking)}", hint=HINT)
    return df, metadata
