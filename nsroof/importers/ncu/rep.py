"""Read Nsight Compute binary reports (.ncu-rep) into the normalized kernel table.

Two routes, both ending in the table that nsroof.importers.ncu.csv_export.read gives for the raw page:

1. NVIDIA's `ncu_report` module (PyPI `ncu-report`, extra `nsroof[ncu-rep]`; x86-64 Linux wheel).
   Values come from each metric's typed value (IMetric.kind/value), units from IMetric.unit(), and
   are scaled to SI base units through nsroof.units, so no number is ever parsed from text.
2. Without the module but with the `ncu` CLI on PATH: `LC_ALL=C ncu -i REPORT --csv --page raw
   --print-units base`, parsed by nsroof.importers.ncu.csv_export.

Before either route the container itself is checked (nsroof.importers.ncu.rep_container: magic
`NVR\\0`, the length-prefixed protobuf header and blocks). `ncu_report` loads a damaged file silently as
zero kernels, so damage has to be found there and reported as such.
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
import os
import platform
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from nsroof.counters import dimensions
from nsroof.errors import InputError, UnitError
from nsroof.importers.kernel_table import empty_identity
from nsroof.importers.ncu.rep_container import (
    CSV_ROUTE,
    DAMAGED_HINT,
    Container,
    ProcessInfo,
    check_container,
)
from nsroof.schema import IDENTITY_COLUMNS, FileFacts

FORMAT = "ncu-rep"

# Metrics whose value is a list of other metric names (section bookkeeping); the raw page omits them.
_META_METRIC_PREFIXES = ("group:", "breakdown:", "regex:")

# ---------------------------------------------------------------------------------------------
# Reading through ncu_report
# ---------------------------------------------------------------------------------------------


def read(path: str | os.PathLike[str]) -> tuple[pd.DataFrame, FileFacts]:
    """The normalized kernel table of one .ncu-rep report and its file facts (see nsroof.schema)."""
    p = Path(path)
    container = check_container(p)
    module = _load_ncu_report_module()
    if module is not None:
        return _read_with_module(module, p, container)
    ncu = shutil.which("ncu")
    if ncu is not None:
        return _read_with_cli(ncu, p, container)
    raise InputError(p, _no_reader_cause(), hint=CSV_ROUTE)


def _load_ncu_report_module() -> Any | None:
    try:
        import ncu_report
    except (ImportError, OSError):
        # OSError: the wheel is there but its shared libraries cannot load on this platform
        return None
    return ncu_report


def _no_reader_cause() -> str:
    machine, system = platform.machine(), platform.system()
    if (system, machine) in {("Linux", "x86_64"), ("Linux", "AMD64")}:
        why = "the `ncu-report` package is not installed (pip install 'nsroof[ncu-rep]')"
    else:
        why = (
            f"the `ncu-report` package has a wheel for x86-64 Linux only, and this is {system} {machine}"
        )
    return f"cannot read a .ncu-rep here: {why}, and no `ncu` command is on PATH"


def _read_with_module(module: Any, p: Path, container: Container) -> tuple[pd.DataFrame, FileFacts]:
    # The library's C++ side logs parse failures straight to file descriptor 2 and carries on with
    # empty kernels; catch that text so the user sees one clean line, and use it as the cause.
    library_log: list[str] = []
    with _stderr_captured(library_log):
        try:
            context = module.load_report(str(p))
            actions = [action for rng in _ranges(context) for action in _actions(rng)]
            mangled = [action.name(module.IAction.NameBase_MANGLED) for action in actions]
        except (RuntimeError, ValueError, OSError) as exc:
            raise InputError(p, f"ncu_report could not load the report ({exc})", hint=DAMAGED_HINT) from None
    if len(actions) != container.num_results:
        raise InputError(
            p,
            f"damaged .ncu-rep file: ncu_report found {len(actions)} of the {container.num_results} "
            "profiled kernels the file declares",
            hint=DAMAGED_HINT,
        )
    unreadable = [k for k, name in enumerate(mangled) if not name]
    if unreadable:
        said = _first_line(library_log)
        raise InputError(
            p,
            f"damaged .ncu-rep file: ncu_report could not parse profile result {unreadable[0]} "
            f"of {len(actions)}" + (f" ({said})" if said else ""),
            hint=DAMAGED_HINT,
        )
    processes: Sequence[ProcessInfo] = container.processes
    rows: list[dict[str, Any]] = []
    metric_values: list[dict[str, Any]] = []
    metric_units: dict[str, str] = {}
    ignored: list[tuple[str, str]] = []
    with _stderr_captured(library_log):
        for kernel_id, action in enumerate(actions):
            try:
                values, units = _action_metrics(module, action, p, kernel_id, ignored)
                rows.append(_identity(module, action, kernel_id, processes[kernel_id], values))
            except Exception as exc:  # noqa: BLE001 — re-raised below unless NVIDIA's module raised it
                if not _raised_by_library(exc):
                    raise
                raise InputError(p, f"damaged .ncu-rep file: ncu_report failed on profile result {kernel_id} "
                                 f"({type(exc).__name__}: {' '.join(str(exc).split())[:160]})",
                                 hint=DAMAGED_HINT) from None
            metric_values.append(values)
            for name, unit in units.items():
                metric_units.setdefault(name, unit)
    frame = _assemble(p, rows, metric_values, metric_units)
    _check_text(p, frame)
    facts = FileFacts(
        format=FORMAT, source=p.name,
        metric_units={name: metric_units[name] for name in frame.columns if name in metric_units},
        reader=f"ncu_report {_library_version(context)}", extra={"report_file_version": container.version})
    if _first_line(library_log):
        facts.warnings.append(f"ncu_report said: {_first_line(library_log)}")
    dropped = dimensions.ignored_warning(ignored)
    if dropped is not None:
        facts.warnings.append(dropped)
    return frame, facts


# submetrics per cycle: the raw page prints the counter's unit over `cycle` where IMetric.unit() may not
_PER_CYCLE = ("peak_sustained", "peak_sustained_active", "peak_sustained_elapsed", "per_cycle_active",
              "per_cycle_elapsed")


def csv_unit(metric: str, unit: str) -> str:
    """IMetric.unit()'s spelling -> the one the raw page prints for the same metric (`ncu -i --csv --page
    raw --print-units base`), where the two differ in what nsroof.units reads: `1/s` (a per-second rate
    of a count without unit) is the CSV's `/second`; a per-cycle submetric given the bare counter unit
    (`inst` for …pred_on.sum.peak_sustained) is `inst/cycle`; ncu's derived FMA counts are in `thread`.
    Pure respellings (`byte/s` = `byte/second`, `ns` = `nsecond`) need nothing: nsroof.units reads both."""
    if unit == "1/s":
        return "/second"
    parts = metric.split(".")
    if len(parts) >= 3 and ".".join(parts[2:]) in _PER_CYCLE and unit and "/" not in unit:
        return f"{unit}/cycle"
    if len(parts) == 1 and unit == "inst" and metric.startswith("derived__") and "_pred_on_x" in metric:
        return "thread"
    return unit


def _check_text(p: Path, frame: pd.DataFrame) -> None:
    """Text from a damaged report can hold bytes that are not UTF-8 (ncu_report hands them over as lone
    surrogates): refused here, where the report is named, not later by the Parquet writer."""
    for column in frame.columns:
        if frame[column].dtype != object:
            continue
        for i, value in enumerate(frame[column].tolist()):
            if isinstance(value, str) and not value.isascii():
                try:
                    value.encode("utf-8")
                except UnicodeEncodeError:
                    raise InputError(p, f"damaged .ncu-rep file: {column} of profile result {i} is not "
                                     "UTF-8 text", hint=DAMAGED_HINT) from None


def _raised_by_library(exc: BaseException) -> bool:
    """Whether `exc` came out of NVIDIA's ncu_report (its SWIG wrappers raise TypeError, RuntimeError …
    on what a damaged report holds, e.g. a metric name that is not text): an input problem then, while
    the same exception from nsroof's own code is a bug and keeps its traceback."""
    import traceback

    frames = traceback.extract_tb(exc.__traceback__)
    # the module is ncu_report.py, or the package ncu_report/__init__.py (the wheel)
    return bool(frames) and any(part.startswith("ncu_report")
                                for part in Path(frames[-1].filename).parts[-2:])


@contextlib.contextmanager
def _stderr_captured(sink: list[str]) -> Iterator[None]:
    """Redirect file descriptor 2 (where native code writes) into `sink` for the block's duration."""
    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile() as capture:
        os.dup2(capture.fileno(), 2)
        try:
            yield
        finally:
            os.dup2(saved, 2)
            os.close(saved)
            capture.seek(0)
            sink.append(capture.read().decode("utf-8", "replace"))


def _first_line(log: list[str]) -> str:
    """The first library message worth showing (absl's 'before InitializeLog' banner skipped)."""
    for line in "".join(log).splitlines():
        text = line.strip()
        if text and not text.startswith("WARNING: All log messages before absl::InitializeLog()"):
            # absl prefix: E0000 00:00:1796043032.316937   30767 message_lite.cc:195] <message>
            text = text.split("] ", 1)[1] if "] " in text and text[:1] in "EWIF" else text
            return text[:300]
    return ""


def _ranges(context: Any) -> Iterator[Any]:
    for i in range(context.num_ranges()):
        yield context.range_by_idx(i)


def _actions(rng: Any) -> Iterator[Any]:
    for i in range(rng.num_actions()):
        yield rng.action_by_idx(i)


def _library_version(context: Any) -> str:
    try:
        return str(context.get_version())
    except Exception:  # only a label; older modules may lack get_version
        return "?"


def _action_metrics(module: Any, action: Any, p: Path, kernel_id: int,
                    ignored: list[tuple[str, str]]) -> tuple[dict[str, Any], dict[str, str]]:
    """{metric: SI float or str}, {metric: SI unit} for one kernel, from the typed values. A metric no
    roofline number reads, in a unit nsroof cannot use, is left out and appended to `ignored`."""
    from nsroof import units as nsunits

    kind_string, kind_unknown = module.IMetric.ValueKind_STRING, module.IMetric.ValueKind_UNKNOWN
    values: dict[str, Any] = {}
    unit_of: dict[str, str] = {}
    for name in action.metric_names():
        name = str(name)
        if name.startswith(_META_METRIC_PREFIXES):
            continue
        metric = action.metric_by_name(name)
        if metric is None:
            continue
        kind = metric.kind()
        if kind == kind_string:
            text = metric.value() if metric.has_value() else None
            # an empty string is what the raw page prints for "no value": missing, as there
            values[name] = str(text) if text else math.nan
            continue
        unit = str(metric.unit())
        if kind == kind_unknown or not metric.has_value():
            number = math.nan
        else:
            raw = metric.value()
            if raw is None:
                number = math.nan
            elif isinstance(raw, str):  # a kind the module reports as numeric but hands back as text
                values[name] = raw
                continue
            else:
                number = float(raw)
        unit = csv_unit(name, unit)
        try:
            scale = nsunits.scale(unit)
            wrong = dimensions.check(name, scale.base)
            why, hint = f"kernel {kernel_id}: unit {unit!r} of the wrong dimension: {wrong}", DAMAGED_HINT
        except nsunits.UnknownUnitError:
            wrong, why = "unknown", f"kernel {kernel_id}, metric {name}: unknown unit {unit!r}"
            hint = "report it with the metric name; nsroof never guesses a scale"
        # no value (a failed launch): no unit to check; else strict where a number reads it
        if wrong is not None:
            if math.isnan(number):
                values[name] = number
            elif dimensions.is_read(name):
                raise UnitError(p, why, hint=hint)
            else:
                ignored.append((name, unit))
            continue
        values[name], unit_of[name] = number * scale.factor, scale.base
    return values, unit_of


def _number(values: dict[str, Any], name: str) -> float | None:
    value = values.get(name)
    if isinstance(value, float) and not math.isnan(value):
        return value
    return None


def _dims(values: dict[str, Any], prefix: str) -> str:
    dims = [_number(values, f"{prefix}_{axis}") for axis in "xyz"]
    if any(d is None for d in dims):
        return ""
    return "(" + ", ".join(str(int(d)) for d in dims if d is not None) + ")"


def _identity(module: Any, action: Any, kernel_id: int, process: ProcessInfo,
              values: dict[str, Any]) -> dict[str, Any]:
    from nsroof.names import kernel_names, nvtx_paths

    kernel_name = str(action.name(module.IAction.NameBase_DEMANGLED))
    major = _number(values, "device__attribute_compute_capability_major")
    minor = _number(values, "device__attribute_compute_capability_minor")
    device = values.get("device__attribute_display_name")
    ranges = _nvtx_ranges(action)
    device_id = _number(values, "launch__device_id")
    context = _number(values, "launch__context_id")
    stream = _number(values, "launch__stream_id")
    return {
        "kernel_id": kernel_id,
        "process_id": process.process_id,
        "process_name": os.path.basename(process.name),
        "host": process.host,
        "device": device if isinstance(device, str) else "",
        "device_id": None if device_id is None else int(device_id),
        "cc": "" if major is None or minor is None else f"{int(major)}.{int(minor)}",
        "kernel_name": kernel_name,
        "function": kernel_names.short_name(kernel_name),
        "grid": _dims(values, "launch__grid_dim"),
        "block": _dims(values, "launch__block_dim"),
        "context": None if context is None else int(context),
        "stream": None if stream is None else int(stream),
        "nvtx_ranges": ranges,
        "nvtx_path": nvtx_paths.path(ranges),
    }


def _nvtx_ranges(action: Any) -> list[str]:
    """Range names enclosing the launch, outermost first: every domain's push/pop stack (bottom of
    the stack first, as INvtxDomainInfo.push_pop_ranges() returns it), then start/end ranges."""
    state = action.nvtx_state()
    if state is None:
        return []
    push_pop: list[str] = []
    start_end: list[str] = []
    for domain_id in state.domains():
        domain = state.domain_by_id(domain_id)
        push_pop.extend(str(r) for r in domain.push_pop_ranges())
        start_end.extend(str(r) for r in domain.start_end_ranges())
    return push_pop + start_end


def _assemble(
    p: Path, rows: list[dict[str, Any]], metric_values: list[dict[str, Any]], metric_units: dict[str, str]
) -> pd.DataFrame:
    n = len(rows)
    columns: dict[str, Any] = empty_identity(n)
    columns["source"] = pd.Series([p.name] * n, dtype="object")
    for name, (dtype, _) in IDENTITY_COLUMNS.items():
        if name == "source":
            continue
        values = [row[name] for row in rows]
        if dtype == "object":
            # the kernel-table contract: plain Python objects (a Series keeps pandas from inferring "str")
            columns[name] = pd.Series(values, dtype="object")
        else:
            columns[name] = pd.array([pd.NA if v is None else v for v in values], dtype=dtype)
    names_sorted = sorted({name for values in metric_values for name in values})
    for name in names_sorted:
        column = [values.get(name, math.nan) for values in metric_values]
        if any(isinstance(v, str) for v in column):
            # a string metric; missing cells stay missing (NaN), as in the CSV importer
            strings = [v if isinstance(v, str) or math.isnan(v) else str(v) for v in column]
            columns[name] = pd.Series(strings, dtype="object")
        else:
            columns[name] = pd.array(column, dtype="float64")
    return pd.DataFrame(columns)


# ---------------------------------------------------------------------------------------------
# Fallback: the ncu CLI
# ---------------------------------------------------------------------------------------------


def ncu_export_command(ncu: str, p: Path) -> list[str]:
    return [ncu, "-i", str(p), "--csv", "--page", "raw", "--print-units", "base"]


def _read_with_cli(ncu: str, p: Path, container: Container) -> tuple[pd.DataFrame, FileFacts]:
    from nsroof.importers.ncu import csv_export

    env = dict(os.environ, LC_ALL="C")  # ncu formats numbers by locale; C gives plain 1234.56
    command = ncu_export_command(ncu, p)
    try:
        done = subprocess.run(command, env=env, capture_output=True, check=False, timeout=600)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise InputError(p, f"running `ncu -i` failed ({exc})", hint=CSV_ROUTE) from None
    if done.returncode != 0:
        message = " ".join(done.stderr.decode("utf-8", "replace").split())[:300]
        raise InputError(p, f"`ncu -i` exited with {done.returncode}: {message}", hint=CSV_ROUTE)
    with tempfile.TemporaryDirectory(prefix="nsroof-ncu-rep-") as tmp:
        csv_path = Path(tmp) / (p.stem + ".raw.csv")
        csv_path.write_bytes(done.stdout)
        frame, csv_facts = csv_export.read(csv_path)
    if len(frame) != container.num_results:
        raise InputError(
            p,
            f"damaged .ncu-rep file: `ncu -i` exported {len(frame)} of the {container.num_results} "
            "profiled kernels the file declares",
            hint=DAMAGED_HINT,
        )
    frame["source"] = pd.array([p.name] * len(frame), dtype="object")
    facts = dataclasses.replace(
        csv_facts, format=FORMAT, source=p.name, reader=" ".join(["LC_ALL=C", *ncu_export_command("ncu", p)]),
        extra={**csv_facts.extra, "csv_format": csv_facts.format, "report_file_version": container.version})
    return frame, facts
