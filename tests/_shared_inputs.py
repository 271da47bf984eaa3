"""The shared real traces (../shared/fixtures/traces), parsed once per test process: several modules sweep the
same large traces (the importer's, the attribution's and the ledger's tests), and each parse is seconds.

imported(path) is importers.read(path), memoized; every call gets its own deep copy of the frame and the file
facts, so a test that edits what it got cannot change what another test reads. trace_events(path) is the
trace's JSON events decoded by the standard library (independently of the importer), memoized and read-only
(each event and its args are mappingproxies: an assignment raises TypeError). Both are keyed by the file's
path, size and modification time; the whole set holds about 0.9 GB (most of it the decoded JSON) until the
process ends."""

from __future__ import annotations

import copy
import gzip
import json
import os
from collections.abc import Mapping
from functools import cache
from pathlib import Path
from types import MappingProxyType
from typing import Any

import pandas as pd


def _key(path: str | os.PathLike[str]) -> tuple[str, int, int]:
    p = Path(path).resolve()
    st = p.stat()
    return str(p), st.st_size, st.st_mtime_ns


@cache
def _read(key: tuple[str, int, int]) -> tuple[pd.DataFrame, Any]:
    from nsroof import importers

    return importers.read(key[0])


def imported(path: str | os.PathLike[str]) -> tuple[pd.DataFrame, Any]:
    """importers.read(path), parsed once per process; a fresh deep copy of (kernels, facts) on each call."""
    frame, facts = _read(_key(path))
    return frame.copy(deep=True), copy.deepcopy(facts)


def _frozen(event: dict[str, Any]) -> Mapping[str, Any]:
    args = event.get("args")
    if isinstance(args, dict):
        event = {**event, "args": MappingProxyType(args)}
    return MappingProxyType(event)


@cache
def _events(key: tuple[str, int, int]) -> tuple[Mapping[str, Any], ...]:
    raw = Path(key[0]).read_bytes()
    data = json.loads(gzip.decompress(raw) if raw[:2] == b"\x1f\x8b" else raw)
    events = data["traceEvents"] if isinstance(data, dict) else data
    return tuple(_frozen(e) if isinstance(e, dict) else e for e in events)


def trace_events(path: str | os.PathLike[str]) -> tuple[Mapping[str, Any], ...]:
    """Every event of the trace's JSON (traceEvents, or the list a bare-list trace is), read-only, in file
    order."""
    return _events(_key(path))
