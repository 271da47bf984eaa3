"""Small Nsight Systems SQLite exports written by the tests, table by table as NVIDIA's "SQLite Export Schema
Reference" documents them (https://docs.nvidia.com/nsight-systems/UserGuide/index.html#exporter-sqlite-schema;
column sets of the 2024-2025 exports: CUPTI_ACTIVITY_KIND_KERNEL's names as StringIds ids, NVTX text inline
or through textId). Times in ns; one process (pid 100), its threads globalTid = pid << 24 | tid."""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

PID = 100
H100 = ("NVIDIA H100 80GB HBM3", 9, 0, 132, 1_980_000_000, 3_352_320_000_000)

# The tables as nsys 2024-2025 exports declare them (the bench's large exports write the same:
# benchmarks/bench_nsys.py)
SCHEMA = """
        CREATE TABLE StringIds (id INTEGER PRIMARY KEY, value TEXT NOT NULL);
        CREATE TABLE META_DATA_EXPORT (name TEXT, value TEXT);
        CREATE TABLE TARGET_INFO_GPU (vmId INTEGER, id INTEGER, name TEXT, busLocation TEXT,
            isDiscrete INTEGER, l2CacheSize INTEGER, totalMemory INTEGER, memoryBandwidth INTEGER,
            clockRate INTEGER, smCount INTEGER, cuDevice INTEGER, computeMajor INTEGER, computeMinor INTEGER);
        CREATE TABLE CUPTI_ACTIVITY_KIND_RUNTIME (start INTEGER NOT NULL, end INTEGER NOT NULL,
            eventClass INTEGER NOT NULL, globalTid INTEGER, correlationId INTEGER, nameId INTEGER NOT NULL,
            returnValue INTEGER NOT NULL, callchainId INTEGER);
        CREATE TABLE NVTX_EVENTS (start INTEGER NOT NULL, end INTEGER, eventType INTEGER NOT NULL,
            rangeId INTEGER, category INTEGER, color INTEGER, text TEXT, globalTid INTEGER,
            endGlobalTid INTEGER, textId INTEGER, domainId INTEGER, uint64Value INTEGER, int64Value INTEGER,
            doubleValue REAL, uint32Value INTEGER, int32Value INTEGER, floatValue REAL, jsonTextId INTEGER,
            jsonText TEXT);
        CREATE TABLE CUPTI_ACTIVITY_KIND_MEMSET (start INTEGER NOT NULL, end INTEGER NOT NULL,
            deviceId INTEGER NOT NULL, contextId INTEGER NOT NULL, greenContextId INTEGER,
            streamId INTEGER NOT NULL, correlationId INTEGER, globalPid INTEGER, value INTEGER NOT NULL,
            bytes INTEGER NOT NULL, graphNodeId INTEGER, memKind INTEGER NOT NULL);
"""
KERNEL_TABLE = """CREATE TABLE CUPTI_ACTIVITY_KIND_KERNEL (start INTEGER NOT NULL, end INTEGER NOT NULL,
            deviceId INTEGER NOT NULL, contextId INTEGER NOT NULL, greenContextId INTEGER,
            streamId INTEGER NOT NULL, correlationId INTEGER, globalPid INTEGER,
            demangledName INTEGER NOT NULL,
            shortName INTEGER NOT NULL, mangledName INTEGER, launchType INTEGER, cacheConfig INTEGER,
            registersPerThread INTEGER NOT NULL, gridX INTEGER NOT NULL, gridY INTEGER NOT NULL,
            gridZ INTEGER NOT NULL, blockX INTEGER NOT NULL, blockY INTEGER NOT NULL, blockZ INTEGER NOT NULL,
            staticSharedMemory INTEGER NOT NULL, dynamicSharedMemory INTEGER NOT NULL,
            localMemoryPerThread INTEGER, localMemoryTotal INTEGER, gridId INTEGER,
            sharedMemoryExecuted INTEGER,
            graphNodeId INTEGER, sharedMemoryLimitConfig INTEGER, graphId INTEGER)"""


def gtid(tid: int) -> int:
    return PID << 24 | tid


@dataclass
class Export:
    """What the export holds: rows as tuples, names as text (the writer interns them in StringIds)."""

    # (name, start, end, correlation, stream, graph node id, graph id)
    kernels: list[tuple[Any, ...]] = field(default_factory=list)
    # (api, start, end, correlation, tid)
    launches: list[tuple[str, int, int, int, int]] = field(default_factory=list)
    ranges: list[tuple[str, int, int, int]] = field(default_factory=list)  # (text, start, end, tid)
    memsets: list[tuple[int, int, int, int]] = field(default_factory=list)  # (start, end, corr, bytes)
    graph_launches: list[tuple[int, int, int, int]] = field(default_factory=list)  # (start, end, corr, graph)
    gpus: list[tuple[Any, ...]] = field(default_factory=lambda: [H100])
    text_ids: bool = False  # NVTX text through StringIds (textId) instead of inline
    kernel_table: bool = True


def write(path: Path, export: Export) -> Path:
    strings: dict[str, int] = {}

    def sid(text: str) -> int:
        return strings.setdefault(text, len(strings) + 1)

    db = sqlite3.connect(path)
    db.executescript(SCHEMA)
    if export.kernel_table:
        db.execute(KERNEL_TABLE)
    if export.graph_launches:
        db.execute("""CREATE TABLE CUPTI_ACTIVITY_KIND_GRAPH_TRACE (start INTEGER NOT NULL,
            end INTEGER NOT NULL, deviceId INTEGER, contextId INTEGER, greenContextId INTEGER,
            streamId INTEGER, correlationId INTEGER,
            globalPid INTEGER, graphId INTEGER, graphExecId INTEGER)""")
    for name, start, end, corr, stream, *graph in export.kernels:
        node, gid = (graph + [None, None])[:2]
        db.execute("INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL VALUES "
                   "(?,?,0,1,NULL,?,?,?,?,?,?,0,0,32,64,1,1,128,1,1,0,1024,0,0,?,0,?,0,?)",
                   (start, end, stream, corr, PID << 24, sid(name), sid(name.split("(")[0]), sid(name), corr,
                    node, gid))
    for start, end, corr, nbytes in export.memsets:
        db.execute("INSERT INTO CUPTI_ACTIVITY_KIND_MEMSET VALUES (?,?,0,1,NULL,7,?,?,0,?,NULL,2)",
                   (start, end, corr, PID << 24, nbytes))
    for start, end, corr, graph in export.graph_launches:
        db.execute("INSERT INTO CUPTI_ACTIVITY_KIND_GRAPH_TRACE VALUES (?,?,0,1,NULL,7,?,?,?,1)",
                   (start, end, corr, PID << 24, graph))
    for api, start, end, corr, tid in export.launches:
        db.execute("INSERT INTO CUPTI_ACTIVITY_KIND_RUNTIME VALUES (?,?,1,?,?,?,0,NULL)",
                   (start, end, gtid(tid), corr, sid(api)))
    for text, start, end, tid in export.ranges:
        inline, text_id = (None, sid(text)) if export.text_ids else (text, None)
        db.execute("INSERT INTO NVTX_EVENTS (start, end, eventType, text, globalTid, textId, domainId) "
                   "VALUES (?,?,59,?,?,?,0)", (start, end, inline, gtid(tid), text_id))
    for k, (name, major, minor, sms, clock, bandwidth) in enumerate(export.gpus):
        db.execute("INSERT INTO TARGET_INFO_GPU (vmId, id, name, isDiscrete, memoryBandwidth, clockRate, "
                   "smCount, cuDevice, computeMajor, computeMinor) VALUES (0,?,?,1,?,?,?,?,?,?)",
                   (k, name, bandwidth, clock, sms, k, major, minor))
    db.executemany("INSERT INTO META_DATA_EXPORT VALUES (?, ?)",
                   [("EXPORT_PRODUCT_VERSION", "2025.1.1.110"), ("EXPORT_SCHEMA_VERSION", "3.17.1")])
    db.executemany("INSERT INTO StringIds VALUES (?, ?)", [(i, s) for s, i in strings.items()])
    db.commit()
    db.close()
    return path
