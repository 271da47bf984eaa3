"""The tables of an Nsight Systems SQLite export that nsroof reads, each read in one query of the columns it
needs and handed on column by column (`Columns`: a tuple of values per column, turned from the cursor's
rows in one C-level transpose), never as a table of Python row objects; across the schemas of nsys
2021-2026: a column the export lacks reads as NULL, a table it lacks as no rows.

NVIDIA documents the schema in "SQLite Export Schema Reference" (https://docs.nvidia.com/nsight-systems/
UserGuide/index.html#exporter-sqlite-schema). What changes between versions and is handled here: the
metadata table (EXPORT_META_DATA in 2022, META_DATA_EXPORT later); NVTX text inline (`text`) or by id
(`textId` -> StringIds); `greenContextId`, `graphNodeId`, `graphId` added to the activity tables;
TARGET_INFO_CUDA_DEVICE (CUDA ordinal -> TARGET_INFO_GPU id) present or not; a whole-graph trace table
(CUPTI_ACTIVITY_KIND_GRAPH_TRACE) when graphs were traced as one range per launch.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from nsroof.errors import InputError

Columns = dict[str, Sequence[Any]]  # column name -> its values in row order ({} : the table is absent)

SQLITE_MAGIC = b"SQLite format 3\x00"
KERNEL = "CUPTI_ACTIVITY_KIND_KERNEL"
RUNTIME = "CUPTI_ACTIVITY_KIND_RUNTIME"
MEMCPY = "CUPTI_ACTIVITY_KIND_MEMCPY"
MEMSET = "CUPTI_ACTIVITY_KIND_MEMSET"
GRAPH_TRACE = "CUPTI_ACTIVITY_KIND_GRAPH_TRACE"
NVTX = "NVTX_EVENTS"
STRINGS = "StringIds"
# tables only an Nsight Systems export has: a database with none of them is someone else's
NSYS_TABLES = (STRINGS, NVTX, KERNEL, RUNTIME, "TARGET_INFO_GPU", "META_DATA_EXPORT", "EXPORT_META_DATA",
               "TARGET_INFO_SESSION_START_TIME", "ThreadNames")
# ENUM_NSYS_EVENT_TYPE: the NVTX range kinds (push/pop on one thread, start/end across threads)
PUSH_POP, START_END, DOMAIN_CREATE = 59, 60, 75
EXPORT_HINT = "export the report again with `nsys export --type sqlite -o run.sqlite run.nsys-rep`"


class Database:
    """A read-only connection to one export and the columns of its tables."""

    def __init__(self, path: Path, connection: sqlite3.Connection) -> None:
        self.path = path
        self.connection = connection
        rows = connection.execute("SELECT name FROM sqlite_master WHERE type = 'table'").fetchall()
        self.tables = {str(name) for (name,) in rows}
        self._columns: dict[str, set[str]] = {}

    def columns(self, table: str) -> set[str]:
        if table not in self._columns:
            found = self.connection.execute(f"PRAGMA table_info('{table}')").fetchall() \
                if table in self.tables else []
            self._columns[table] = {str(row[1]) for row in found}
        return self._columns[table]

    def column(self, table: str, name: str, alias: str = "", prefix: str = "t.") -> str:
        """`t.name AS alias`, or `NULL AS alias` where the schema lacks the column."""
        alias = alias or name
        return f"{prefix}{name} AS {alias}" if name in self.columns(table) else f"NULL AS {alias}"

    def read(self, sql: str, what: str) -> Columns:
        """The query's columns by name (`what`: the table, for an error's line)."""
        try:
            cursor = self.connection.execute(sql)
            names = [d[0] for d in cursor.description]
            rows = cursor.fetchall()
            return dict(zip(names, zip(*rows, strict=True) if rows else [()] * len(names), strict=True))
        except sqlite3.DatabaseError as exc:
            if str(exc).startswith(_NOT_UTF8):  # sqlite3's own decoding (a Python text_factory costs a call
                # per value): "Could not decode to UTF-8 column 'text' with text '…'"
                raise InputError(self.path, f"{what}: text that is not UTF-8 ({str(exc)[:120]})",
                                 hint=EXPORT_HINT) from None
            raise damaged(self.path, exc) from None


def damaged(path: Path, exc: BaseException) -> InputError:
    return InputError(path, f"damaged SQLite database ({exc})",
                      hint="the file may be truncated: " + EXPORT_HINT)


_NOT_UTF8 = "Could not decode to UTF-8"


@contextmanager
def opened(path: Path) -> Iterator[Database]:
    """The export, opened read-only (immutable: no journal is written beside a shared file)."""
    try:
        connection = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro&immutable=1", uri=True)
    except sqlite3.Error as exc:
        raise damaged(path, exc) from None
    try:
        try:
            db = Database(path, connection)
        except sqlite3.DatabaseError as exc:
            raise damaged(path, exc) from None
        yield db
    finally:
        connection.close()


def check(db: Database) -> None:
    """An Nsight Systems export with CUDA kernels, or the one line saying what it lacks."""
    if not db.tables & set(NSYS_TABLES):
        raise InputError(db.path, "an SQLite database without any Nsight Systems table (StringIds, "
                         "NVTX_EVENTS, CUPTI_ACTIVITY_KIND_*): not an nsys export", hint=EXPORT_HINT)
    if KERNEL not in db.tables and GRAPH_TRACE not in db.tables:
        raise InputError(db.path, f"an Nsight Systems export without CUDA kernels (no {KERNEL} table): the "
                         "capture traced no CUDA work",
                         hint="profile with `nsys profile --trace=cuda,nvtx …` around GPU work "
                              "(or `nsroof nsys -- python train.py`)")
    for table in (KERNEL, GRAPH_TRACE):
        if table in db.tables and not {"start", "end", "correlationId"} <= db.columns(table):
            raise InputError(db.path, f"table {table} lacks start/end/correlationId: not an nsys export",
                             hint=EXPORT_HINT)


def metadata(db: Database) -> dict[str, str]:
    """The export's own metadata (product and schema version), under 2022's or the later table name."""
    for table in ("META_DATA_EXPORT", "EXPORT_META_DATA"):
        if {"name", "value"} <= db.columns(table):
            cols = db.read(f"SELECT name, value FROM {table}", table)
            return {str(k): str(v) for k, v in zip(cols["name"], cols["value"], strict=True)
                    if k in ("EXPORT_PRODUCT_VERSION", "EXPORT_SCHEMA_VERSION")}
    return {}


def _name(db: Database, table: str, column: str) -> str:
    """The text of a StringIds-valued column (LEFT JOIN: a missing id reads as NULL)."""
    if column not in db.columns(table) or STRINGS not in db.tables:
        return "NULL"
    return f"(SELECT s.value FROM {STRINGS} s WHERE s.id = t.{column})"


def kernels(db: Database) -> Columns:
    """One row per kernel: times (ns), device, stream, correlation, graph ids, launch configuration, name."""
    if KERNEL not in db.tables:
        return {}
    cols = db.columns(KERNEL)
    name = next((c for c in ("demangledName", "shortName", "mangledName") if c in cols), "")
    c = db.column
    sql = (f"SELECT t.start, t.end, t.correlationId, {c(KERNEL, 'deviceId')}, {c(KERNEL, 'contextId')}, "
           f"{c(KERNEL, 'streamId')}, {c(KERNEL, 'graphNodeId')}, {c(KERNEL, 'graphId')}, "
           f"{c(KERNEL, 'registersPerThread')}, {c(KERNEL, 'staticSharedMemory')}, "
           f"{c(KERNEL, 'dynamicSharedMemory')}, "
           + ", ".join(c(KERNEL, f"{d}{x}") for d in ("grid", "block") for x in "XYZ")
           + f", {_name(db, KERNEL, name) if name else 'NULL'} AS name FROM {KERNEL} t")
    return db.read(sql, KERNEL)


def copies(db: Database, table: str) -> Columns:
    """One row per memcpy or memset: times, device, stream, correlation, bytes, kinds."""
    if table not in db.tables:
        return {}
    c = db.column
    extra = ([c(table, "copyKind"), c(table, "srcKind"), c(table, "dstKind")] if table == MEMCPY
             else [c(table, "memKind")])
    sql = (f"SELECT t.start, t.end, {c(table, 'correlationId')}, {c(table, 'deviceId')}, "
           f"{c(table, 'contextId')}, {c(table, 'streamId')}, {c(table, 'graphNodeId')}, "
           f"{c(table, 'graphId')}, {c(table, 'bytes')}, {', '.join(extra)} FROM {table} t")
    return db.read(sql, table)


def graph_launches(db: Database) -> Columns:
    """One row per whole-graph execution (`--cuda-graph-trace=graph`): times, device, stream, graph id."""
    if GRAPH_TRACE not in db.tables:
        return {}
    c = db.column
    sql = (f"SELECT t.start, t.end, t.correlationId, {c(GRAPH_TRACE, 'deviceId')}, "
           f"{c(GRAPH_TRACE, 'contextId')}, {c(GRAPH_TRACE, 'streamId')}, {c(GRAPH_TRACE, 'graphId')}, "
           f"{c(GRAPH_TRACE, 'graphExecId')} FROM {GRAPH_TRACE} t")
    return db.read(sql, GRAPH_TRACE)


def launches(db: Database, activity_tables: list[str]) -> Columns:
    """The runtime/driver calls that launched one of the activities (matched by correlationId in SQLite:
    most runtime calls launch nothing and are never read)."""
    if RUNTIME not in db.tables or not {"start", "end", "correlationId", "globalTid"} <= db.columns(RUNTIME):
        return {}
    wanted = " UNION ".join(f"SELECT correlationId FROM {t}" for t in activity_tables if t in db.tables)
    where = f" WHERE t.correlationId IN ({wanted})" if wanted else " WHERE 0"
    sql = (f"SELECT t.start, t.end, t.globalTid, t.correlationId, {_name(db, RUNTIME, 'nameId')} AS name "
           f"FROM {RUNTIME} t{where}")
    return db.read(sql, RUNTIME)


def nvtx_ranges(db: Database) -> Columns:
    """Push/pop and start/end ranges with their text (inline, or by textId) and domain id."""
    cols = db.columns(NVTX)
    if not {"start", "end", "eventType"} <= cols:
        return {}
    sql = (f"SELECT t.start, t.end, {db.column(NVTX, 'globalTid')}, {db.column(NVTX, 'domainId')}, "
           f"{_text(db)} AS text FROM {NVTX} t WHERE t.eventType IN ({PUSH_POP}, {START_END}) "
           "AND t.end IS NOT NULL")
    return db.read(sql, NVTX)


def nvtx_domains(db: Database) -> dict[int, str]:
    """NVTX domain id -> name, from the domain-creation events (id 0, the default domain, has none)."""
    if not {"eventType", "domainId"} <= db.columns(NVTX):
        return {}
    sql = f"SELECT t.domainId, {_text(db)} AS text FROM {NVTX} t WHERE t.eventType = {DOMAIN_CREATE}"
    cols = db.read(sql, NVTX)
    return {int(d): str(t) for d, t in zip(cols["domainId"], cols["text"], strict=True)
            if d is not None and t is not None}


def _text(db: Database) -> str:
    """An NVTX event's text: inline (`text`), else through StringIds (`textId`)."""
    cols = db.columns(NVTX)
    text = "t.text" if "text" in cols else "NULL"
    if "textId" in cols and STRINGS in db.tables:
        text = f"COALESCE({text}, (SELECT s.value FROM {STRINGS} s WHERE s.id = t.textId))"
    return text


def gpus(db: Database) -> list[dict[str, Any]]:
    """The target GPUs, each with `cuda_id`, the CUDA device ordinal a kernel's deviceId names: through
    TARGET_INFO_CUDA_DEVICE (cudaId -> gpuId) where the export has it, else the GPU's cuDevice, else its
    id."""
    table = "TARGET_INFO_GPU"
    if "name" not in db.columns(table):
        return []
    c = db.column
    cols = db.read(f"SELECT {c(table, 'id')}, {c(table, 'cuDevice')}, t.name, "
                   f"{c(table, 'computeMajor')}, {c(table, 'computeMinor')}, {c(table, 'smCount')}, "
                   f"{c(table, 'clockRate')}, {c(table, 'memoryBandwidth')} FROM {table} t", table)
    rows = [dict(zip(cols, row, strict=True)) for row in zip(*cols.values(), strict=True)]
    by_gpu: dict[Any, Any] = {}
    if {"gpuId", "cudaId"} <= db.columns("TARGET_INFO_CUDA_DEVICE"):
        ordinal = db.read("SELECT DISTINCT gpuId, cudaId FROM TARGET_INFO_CUDA_DEVICE",
                          "TARGET_INFO_CUDA_DEVICE")
        by_gpu = dict(zip(ordinal["gpuId"], ordinal["cudaId"], strict=True))
    for row in rows:
        own = row["cuDevice"] if row["cuDevice"] is not None else row["id"]
        row["cuda_id"] = by_gpu.get(row["id"], own)
    return rows
