"""The report file: Parquet with the declared schema and nsroof's metadata, written atomically; and
the dataset folder (many reports) laid out so that every Parquet reader loads it.

`pandas.read_parquet(path)` loads either as is; `nsroof.load(path)` adds categorical dtypes and reads
a dataset lazily through pyarrow.dataset, filters applied before the rows are converted.

Dataset layout: ``DIR/host-<host>/rank-<rank>/source-<source>/part-0.parquet`` (values
percent-encoded, ``unknown`` when no evidence names them) plus ``DIR/_nsroof_dataset.json``. The folder
names are for people and for finding an existing part; they are not hive ``key=value`` keys. host,
rank and source are typed file columns (DATASET_FIELDS), because a hive key (a) that is also a file
column fails pyarrow and pandas ("host: string vs dictionary"), (b) whose every value is null fails
their type inference ("No non-null segments"; the usual one-node run has no rank), and (c) comes back
with a different type from each reader (pyarrow int32 dictionary, DuckDB BIGINT, polars Int64; DuckDB
and polars turn date-like names into dates). A file column has one declared type in every reader.
"""

from __future__ import annotations

import contextlib
import json
import os
import urllib.parse
from collections.abc import Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from nsroof._version import __version__
from nsroof.atomic import atomic_path, cannot_write
from nsroof.digest import sha256_of
from nsroof.frames.distinct import first_appearances, identity_codes
from nsroof.roofs.machines import Machine
from nsroof.schema import DATASET_FIELDS, REPORT_FIELDS, SCHEMA_VERSION, Field, arrow_schema

METADATA_KEY = b"nsroof"


def input_record(path: str | os.PathLike[str]) -> dict[str, str]:
    return {"name": Path(path).name, "path": os.fspath(path), "sha256": sha256_of(path)}


def build_metadata(
    *,
    inputs: Iterable[dict[str, str] | str | os.PathLike[str]] = (),
    machines: Sequence[Machine] = (),
    extra: dict[str, Any] | None = None,
) -> dict[str, Any]:
    records = [i if isinstance(i, dict) else input_record(i) for i in inputs]
    meta: dict[str, Any] = {
        "nsroof_version": __version__,
        "schema_version": SCHEMA_VERSION,
        "inputs": records,
        "ceilings": [m.to_dict() | {"label": m.label} for m in machines],
        "units": {f.name: f.unit for f in REPORT_FIELDS if f.unit},
    }
    if extra:
        meta.update(extra)
    return meta


def to_table(report: pd.DataFrame, metadata: dict[str, Any],
             fields: tuple[Field, ...] = REPORT_FIELDS) -> pa.Table:
    """The report as an Arrow table of the declared schema, its columns built directly (no pandas object
    column converted cell by cell: a text column is each distinct value converted once, then gathered),
    with pandas' own metadata beside nsroof's, so plain read_parquet restores the dtypes."""
    columns = [f.name for f in fields]
    missing = [c for c in columns if c not in report.columns]
    if missing:
        raise ValueError(f"report lacks columns {missing}")
    schema = arrow_schema({METADATA_KEY: json.dumps(metadata, default=str).encode()}, fields)
    arrays = [arrow_column(report[f.name], f.type) for f in fields]
    meta = {**_pandas_metadata(report.iloc[:0][columns], schema), METADATA_KEY: schema.metadata[METADATA_KEY]}
    return pa.Table.from_arrays(arrays, schema=schema.with_metadata(meta))


# below this many rows an object column is converted cell by cell: the gather's fixed cost is more
IDENTITY_MIN_ROWS = 256


def arrow_column(column: pd.Series, arrow_type: pa.DataType) -> pa.Array:
    """One report column as an Arrow array of `arrow_type`, as pyarrow's from_pandas converts it (NaN and
    None are null). A categorical column is its categories gathered by its codes; an object column of
    few distinct objects (a report repeats a few kernel names and missing-metric texts over thousands of
    rows, shared objects) each distinct object converted once, then gathered: measured 62 -> 3 ms for the
    `missing` column of a 27,000-row report (13 MB of text)."""
    if isinstance(column.dtype, pd.CategoricalDtype):
        codes = column.cat.codes.to_numpy()
        categories = pa.array(column.cat.categories.to_numpy(dtype=object), type=arrow_type, from_pandas=True)
        return categories.take(pa.array(codes, mask=codes < 0))
    if column.dtype == object and len(column) >= IDENTITY_MIN_ROWS:
        values = np.ascontiguousarray(column.to_numpy())
        # by object identity: no hashing of the texts (a pandas factorize hashed every cell's bytes)
        codes = identity_codes(values)
        if 2 * (int(codes.max()) + 1) <= len(values):
            distinct = pa.array(values[first_appearances(codes)], type=arrow_type, from_pandas=True)
            return distinct.take(pa.array(codes))
    return pa.array(column, type=arrow_type, from_pandas=True)



def _pandas_metadata(empty: pd.DataFrame, schema: pa.Schema) -> dict[bytes, bytes]:
    """pandas' schema metadata (column dtypes, no index), as from_pandas writes it for a report: made from
    none of its rows (`empty`: it depends on the dtypes and the Arrow types alone), categoricals as text."""
    categorical = [c for c in empty.columns if isinstance(empty[c].dtype, pd.CategoricalDtype)]
    if categorical:
        empty = empty.astype({name: object for name in categorical})
    return dict(pa.Table.from_pandas(empty, schema=schema, preserve_index=False).schema.metadata or {})


def write_options(table: pa.Table) -> dict[str, Any]:
    """pyarrow.parquet.write_table options for report files: zstd; dictionary pages for the text
    columns only (they repeat a few values; the numbers rarely repeat, and dictionary-encoding them
    made the file larger and slower to write: 0.56 -> 0.42 MB, 29 -> 25 ms for 9,600 rows)."""
    return {"compression": "zstd",
            "use_dictionary": [f.name for f in table.schema if pa.types.is_string(f.type)]}


def write(
    report: pd.DataFrame,
    path: str | os.PathLike[str],
    *,
    inputs: Iterable[dict[str, str] | str | os.PathLike[str]] = (),
    machine: Machine | None = None,
    machines: Sequence[Machine] = (),
    extra_metadata: dict[str, Any] | None = None,
    metadata: dict[str, Any] | None = None,
    fields: tuple[Field, ...] = REPORT_FIELDS,
) -> Path:
    """Write `report` to `path` atomically (temporary file, then rename)."""
    if metadata is None:
        used = list(machines) or ([machine] if machine is not None else [])
        metadata = build_metadata(inputs=inputs, machines=used, extra=extra_metadata)
    write_files([(report, Path(path))], metadata, fields)
    return Path(path)


def write_files(reports: Sequence[tuple[pd.DataFrame, Path]], metadata: dict[str, Any],
                fields: tuple[Field, ...] = REPORT_FIELDS) -> None:
    """Report files (frame, path) of one metadata, each written to a temporary file beside its path, side
    by side (Arrow's encoding and compression release the GIL: a trace's report and its op-level rows in
    0.11 s instead of 0.16 s), and renamed into place only once every one is written: a failed write leaves
    each path as it was."""
    with contextlib.ExitStack() as stack:
        temporary = [stack.enter_context(atomic_path(path)) for _, path in reports]
        jobs = [(frame, tmp, path) for (frame, path), tmp in zip(reports, temporary, strict=True)]
        if len(jobs) == 1:
            _write_file(*jobs[0], metadata, fields)
            return
        with ThreadPoolExecutor(len(jobs) - 1) as pool:
            others = [pool.submit(_write_file, *job, metadata, fields) for job in jobs[1:]]
            _write_file(*jobs[0], metadata, fields)
            for done in others:
                done.result()


def _write_file(report: pd.DataFrame, tmp: Path, target: Path, metadata: dict[str, Any],
                fields: tuple[Field, ...]) -> None:
    table = to_table(report, metadata, fields)
    try:
        pq.write_table(table, tmp, **write_options(table))
    except OSError as exc:  # named here: the other files' guards would name their own paths
        raise cannot_write(target, exc) from None


def read_metadata(path: str | os.PathLike[str]) -> dict[str, Any]:
    """The `nsroof` metadata of a report file; for a dataset folder, every part file's merged (each
    part holds its own inputs and ceilings; the other keys come from the first part)."""
    p = Path(path)
    if not p.is_dir():
        raw = pq.read_schema(p).metadata or {}
        return json.loads(raw[METADATA_KEY]) if METADATA_KEY in raw else {}
    merged: dict[str, Any] = {}
    for part in sorted(p.rglob("*.parquet")):
        for key, value in read_metadata(part).items():
            if isinstance(value, list) and key in ("inputs", "ceilings"):
                known = merged.setdefault(key, [])
                known.extend(v for v in value if v not in known)
            else:
                merged.setdefault(key, value)
    return merged


def with_categoricals(df: pd.DataFrame) -> pd.DataFrame:
    for f in REPORT_FIELDS:
        if f.categorical and f.name in df.columns:
            df[f.name] = df[f.name].astype("category")
    return df


def load(path: str | os.PathLike[str], filters: Any = None,
         columns: Sequence[str] | None = None) -> pd.DataFrame:
    """Load a report file or a dataset folder as a DataFrame with categoricals.

    `filters` is what pyarrow/pandas accept (e.g. [("rank", "=", 0)]); on a dataset pyarrow applies it
    while scanning (files whose column statistics exclude it are not read)."""
    p = Path(path)
    if p.is_dir():
        import pyarrow.dataset as ds

        # "hive": a folder someone else partitioned still reads; nsroof's own folders have no keys
        expr = (pq.filters_to_expression(filters)
                if filters is not None and not isinstance(filters, pc.Expression) else filters)
        try:
            dataset = ds.dataset(p, format="parquet", partitioning="hive")
            df = dataset.to_table(filter=expr, columns=list(columns) if columns else None).to_pandas()
        except (pa.ArrowInvalid, pa.ArrowTypeError) as exc:
            from nsroof.errors import InputError

            raise InputError(p, f"not readable as one dataset ({' '.join(str(exc).split())[:200]})",
                             hint="hive keys pyarrow cannot type, as an older nsroof wrote them "
                                  "(host=…/rank=… folders): re-create it with "
                                  "`nsroof analyze INPUTS -o DIR`") from None
    else:
        df = pd.read_parquet(p, filters=filters, columns=list(columns) if columns else None)
    return with_categoricals(df if columns else with_derived_columns(df))


def with_derived_columns(df: pd.DataFrame) -> pd.DataFrame:
    """A report written before `category` and `phase` existed, with them: both are read off the names,
    shapes and times the report holds (nsroof.roofs.classify), so an older report shows, and is written
    again, as a new one."""
    lacking = [c for c in ("category", "phase") if c not in df.columns]
    if not lacking or not {"kernel_name", "level"} <= set(df.columns):
        return df
    from nsroof.roofs import classify

    derive = {"category": classify.categories, "phase": classify.phases}
    return df.assign(**{c: derive[c](df) for c in lacking})


# ---------------------------------------------------------------- dataset folders

PART_FILE = "part-0.parquet"
SUMMARY_FILE = "_nsroof_dataset.json"  # the leading underscore: pyarrow and pandas skip it as data
UNKNOWN = "unknown"


def encode(value: object) -> str:
    """A folder-name value: percent-encoded (never '=', '/' or a leading '.'/'_'), 'unknown' for none."""
    if value is None or (isinstance(value, str) and value == ""):
        return UNKNOWN
    return urllib.parse.quote(str(value), safe="")


def partition_dir(host: str | None, rank: int | None, source: str) -> str:
    return f"host-{encode(host)}/rank-{encode(rank)}/source-{encode(source)}"


def filesystem(out_dir: str) -> tuple[Any, str]:
    """pyarrow filesystem and root path: a local folder, or any URI pyarrow understands
    (s3://, gs://, file://)."""
    from pyarrow import fs as pafs

    if "://" in out_dir:
        fsys, root = pafs.FileSystem.from_uri(out_dir)
        return fsys, root.rstrip("/")
    return pafs.LocalFileSystem(), os.path.abspath(out_dir).replace(os.sep, "/").rstrip("/")


def has_part(fs: Any, directory: str) -> bool:
    from pyarrow import fs as pafs

    info = fs.get_file_info(directory)
    if info.type != pafs.FileType.Directory:
        return False
    return any(i.path.endswith(".parquet")
               for i in fs.get_file_info(pafs.FileSelector(directory, recursive=False)))


def drop_parts(fs: Any, root: str, rank_source: str) -> None:
    """Remove the part files of one input (its `rank-…/source-…` folders under any host) from a dataset, if
    any: an --overwrite run whose input now has none of these rows."""
    from pyarrow import fs as pafs

    if fs.get_file_info(root).type != pafs.FileType.Directory:
        return
    for info in fs.get_file_info(pafs.FileSelector(root, recursive=True)):
        if info.path.endswith(".parquet") and info.path.rsplit("/", 1)[0].endswith(f"/{rank_source}"):
            fs.delete_file(info.path)


def write_part(fs: Any, root: str, rel: str, frame: pd.DataFrame, metadata: dict[str, Any]) -> None:
    """One part file of a dataset (DATASET_FIELDS), written atomically (temporary name in its folder,
    then rename); then any stale files the folder held before are dropped (--overwrite)."""
    from pyarrow import fs as pafs

    directory = f"{root}/{rel}"
    target = f"{directory}/{PART_FILE}"
    if isinstance(fs, pafs.LocalFileSystem):
        write(frame, target, metadata=metadata, fields=DATASET_FIELDS)
    else:
        table = to_table(frame, metadata, DATASET_FIELDS)
        fs.create_dir(directory, recursive=True)
        tmp = f"{directory}/.{PART_FILE}.{os.getpid()}.tmp"
        pq.write_table(table, tmp, filesystem=fs, **write_options(table))
        fs.move(tmp, target)
    for info in fs.get_file_info(pafs.FileSelector(directory, recursive=False)):
        if info.path != target and info.path.endswith(".parquet"):
            fs.delete_file(info.path)
