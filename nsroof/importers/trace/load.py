"""Loading a kineto chrome trace (.json, .json.gz) into the declared schema (nsroof.importers.trace.events),
keeping only the events nsroof reads, in memory bounded by what it keeps rather than by the file.

msgspec first splits the text into its events without decoding them (``traceEvents: list[Raw]``: views of
the text), then each event is decoded alone and kept when it is a complete event of a category read: GPU
activities, runtime launches, CPU ops and annotations, by the category's own struct; flow events, Python
frames and the rest are dropped as they are met. The text is memory-mapped (a gzip stream is decompressed
into anonymous memory) and the pages the decoder has passed are handed back to the kernel as it goes, so
the whole text and the whole event list never stay resident together. The strings and argument texts a
trace repeats (names, threads, an op's input shapes and types) are decoded once and shared.

Text the strict decoder refuses (a JSON error, the NaN / Infinity tokens Python's json module writes, bytes
that are not UTF-8) goes through the standard library's parser, which names the line of a real error; what
it reads is written again as strict JSON (a non-finite number becomes null: an absent value) and loaded the
same way.
"""

from __future__ import annotations

import gc
import gzip
import json
import mmap
import os
import zlib
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import cache
from pathlib import Path
from typing import Any

import msgspec
import numpy as np
from msgspec import Raw

from nsroof.errors import InputError
from nsroof.importers.trace.events import (
    ACTIVITY_CATS,
    ANNOTATION_CATS,
    HINT,
    LAUNCH_CATS,
    NO_ACTIVITY_ARGS,
    NO_LAUNCH_ARGS,
    NO_OP_ARGS,
    OP_CATS,
    RANGE_CAT,
    ActivityArgs,
    Dim3,
    Event,
    LaunchArgs,
    OpArgs,
    OpExtras,
    RangeEvent,
    RangeTrace,
    Shapes,
    Trace,
    TraceEvents,
    Values,
    WireActivityArgs,
    WireEvent,
    WireOpArgs,
    WireTrace,
    mixed_shapes,
    validation_error,
)

CHUNK = 1 << 16  # events decoded between two hand-backs of the text's pages
BOM = b"\xef\xbb\xbf"


class _MixedShapes(Exception):
    """An 'Input Dims' mixing a shape's integers with a tensor list's shapes (the loop's signal)."""


@contextmanager
def paused_gc() -> Iterator[None]:
    """The cyclic collector paused while a trace becomes many small objects (none of them cyclic garbage):
    its passes over the growing heap would cost a sixth of an import. Restored as it was, whatever happens."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


# --------------------------------------------------------------------------- the text


def _cannot_read(p: Path, exc: BaseException) -> InputError:
    return InputError(p, f"cannot read the trace ({exc or type(exc).__name__})",
                      hint="pass a torch.profiler chrome trace (.json or .json.gz); "
                           "re-compress a damaged .gz")


def read_bytes(p: Path) -> bytes:
    """The file's text as bytes (a gzip stream decompressed), for the rare paths that read it whole."""
    buffer, size = read_mapped(p)
    try:
        return bytes(memoryview(buffer)[:size])
    finally:
        if isinstance(buffer, mmap.mmap):
            buffer.close()


def read_mapped(p: Path) -> tuple[mmap.mmap | bytes, int]:
    """(memory holding the file's text, the text's length): the file mapped read-only, or a gzip stream
    decompressed into anonymous memory (sized by the stream's trailer, grown if it is larger), which the
    loader can hand back page by page."""
    try:
        with open(p, "rb") as fh:
            size = os.fstat(fh.fileno()).st_size
            if fh.read(2) != b"\x1f\x8b":
                try:
                    return (mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) if size else b""), size
                # a file that cannot be mapped (a pipe, some network filesystems)
                except (OSError, ValueError):
                    fh.seek(0)
                    text = fh.read()
                    return text, len(text)
            fh.seek(-4, os.SEEK_END)
            # ISIZE: size mod 2**32
            buffer = mmap.mmap(-1, max(int.from_bytes(fh.read(4), "little"), 1 << 16))
            fh.seek(0)
            n = 0
            with gzip.GzipFile(fileobj=fh) as gz:
                while chunk := gz.read(1 << 24):
                    if n + len(chunk) > len(buffer):
                        buffer = _grown(buffer, n, max(2 * len(buffer), n + len(chunk)))
                    buffer[n:n + len(chunk)] = chunk
                    n += len(chunk)
            return buffer, n
    except (OSError, EOFError, zlib.error) as exc:
        raise _cannot_read(p, exc) from None


def _grown(buffer: mmap.mmap, used: int, size: int) -> mmap.mmap:
    """Anonymous memory of `size` bytes holding buffer's first `used`: resized in place where the system
    can (Linux's mremap), else copied to a new mapping."""
    try:
        buffer.resize(size)
        return buffer
    except (OSError, SystemError, ValueError):
        bigger = mmap.mmap(-1, size)
        bigger[:used] = buffer[:used]
        buffer.close()
        return bigger


def _releaser(buffer: mmap.mmap | bytes) -> Callable[[Raw], None]:
    """A function handing back the pages of `buffer` before an event's text (the events before it are
    decoded: the page cache, or nothing for decompressed memory, keeps what is handed back)."""
    if not isinstance(buffer, mmap.mmap) or not hasattr(mmap, "MADV_DONTNEED"):
        return lambda raw: None
    base = np.frombuffer(buffer, dtype=np.uint8).ctypes.data
    page = mmap.PAGESIZE

    def release(raw: Raw) -> None:
        end = np.frombuffer(raw, dtype=np.uint8).ctypes.data - base
        if end >= page:
            buffer.madvise(mmap.MADV_DONTNEED, 0, end // page * page)

    return release


def _standard_parse(p: Path, raw: bytes | bytearray | memoryview) -> Any:
    """The standard library's reading of text msgspec refused: its error names the line."""
    try:
        text = bytes(raw).decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise InputError(p, f"not UTF-8 text ({exc.reason} at byte {exc.start})",
                         hint="pass a torch.profiler chrome trace (.json or .json.gz)") from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise InputError(p, f"not valid JSON ({exc.msg})", line=exc.lineno,
                         hint="the trace may be truncated: re-export it with "
                              "prof.export_chrome_trace()") from None
    except RecursionError:
        raise _too_deep(p) from None
    except ValueError as exc:  # an integer literal of more digits than Python converts (sys.int_info)
        raise InputError(p, f"a number no chrome trace holds ({str(exc).split(';')[0]})", hint=HINT) from None


def _restated(p: Path, raw: bytes | bytearray | memoryview) -> bytes:
    """Text msgspec refused, read by the standard parser (which raises what is wrong, naming the line) and
    written again as strict JSON: what it refused was the NaN / Infinity tokens, now null (absent)."""
    doc = _standard_parse(p, raw)
    try:
        return msgspec.json.encode(doc)
    except OverflowError as exc:
        raise InputError(p, f"a number no chrome trace holds ({exc})", hint=HINT) from None


def _invalid(p: Path) -> InputError:
    return InputError(p, "not valid JSON",
                      hint="the trace may be damaged: re-export it with prof.export_chrome_trace()")


def _too_deep(p: Path) -> InputError:
    return InputError(p, "JSON nested deeper than any chrome trace (refused, not parsed)",
                      hint="pass a torch.profiler chrome trace")


def _out_of_range(p: Path, exc: msgspec.ValidationError) -> InputError | None:
    text = str(exc)
    return InputError(p, f"a number no chrome trace holds ({text.split(' - ')[0]})", hint=HINT) \
        if "out of range" in text else None


# --------------------------------------------------------------------------- decoding


@cache
def _decoders() -> dict[str, Any]:
    return {"trace": msgspec.json.Decoder(WireTrace | list[Raw]),  # type: ignore[arg-type]
            "event": msgspec.json.Decoder(WireEvent), "launch": msgspec.json.Decoder(LaunchArgs),
            "activity": msgspec.json.Decoder(WireActivityArgs), "op": msgspec.json.Decoder(WireOpArgs),
            "shapes": msgspec.json.Decoder(Shapes), "values": msgspec.json.Decoder(Values),
            "dim3": msgspec.json.Decoder(Dim3)}


def _group(cat: str) -> str:
    return ("activity" if cat in ACTIVITY_CATS else "launch" if cat in LAUNCH_CATS
            else "op" if cat in OP_CATS + ANNOTATION_CATS else "range" if cat == RANGE_CAT else "")


class _Texts:
    """Argument texts decoded once per distinct text and shared, per kind (the checks differ)."""

    def __init__(self, decoders: dict[str, Any]) -> None:
        self.shapes = self._reader(decoders["shapes"], refuse=mixed_shapes)
        self.values = self._reader(decoders["values"])
        self.dim3 = self._reader(decoders["dim3"])

    @staticmethod
    def _reader(decoder: Any, refuse: Callable[[Any], bool] | None = None) -> Callable[[Raw], Any]:
        seen: dict[bytes, Any] = {}

        def read(raw: Raw) -> Any:
            if not len(raw):
                return None
            key = bytes(raw)
            found = seen.get(key)
            if found is None:
                found = decoder.decode(key)
                if refuse is not None and refuse(found):
                    raise _MixedShapes
                seen[key] = found
            return found

        return read


def _op_args(w: WireOpArgs, texts: _Texts) -> OpArgs:
    dims = w.input_dims if len(w.input_dims) else w.input_dims_2020
    extras = None if (w.kernel_backend is None and w.collective_name is None and w.kernel_flop is None
                      and w.kernel_num_gb is None and w.in_msg_nelems is None and w.out_msg_nelems is None
                      and w.dtype is None and w.group_size is None) else \
        OpExtras(w.kernel_backend, w.kernel_flop, w.kernel_num_gb, w.collective_name, w.in_msg_nelems,
                 w.out_msg_nelems, w.dtype, w.group_size, w.kernel_kwargs, w.kernel_file, w.grid)
    return OpArgs(w.external_id if w.external_id is not None else w.external_id_2021, w.sequence_number,
                  w.fwd_thread_id, texts.shapes(dims), texts.values(w.input_type),
                  texts.values(w.concrete_inputs), extras)


def _activity_args(w: WireActivityArgs, texts: _Texts) -> ActivityArgs:
    return ActivityArgs(w.external_id, w.external_id_2021, w.correlation, w.graph_id, w.graph_node_id,
                        w.stream, w.device, w.context, w.registers_per_thread, w.shared_memory,
                        texts.dim3(w.grid), texts.dim3(w.block))


def _decode_events(p: Path, raws: list[Raw],
                   release: Callable[[Raw], None]) -> tuple[dict[str, list[Any]], int]:
    """The kept events by category, and how many range-profiler events there were; `raws` is emptied."""
    dec = _decoders()
    wire_event, launch_args, activity_args, op_args = dec["event"], dec["launch"], dec["activity"], dec["op"]
    texts = _Texts(dec)
    by_cat: dict[str, list[Any]] = {c: [] for c in (*ACTIVITY_CATS, *LAUNCH_CATS, *OP_CATS, *ANNOTATION_CATS)}
    routes = {c: (_group(c), by_cat.get(c, []), c) for c in (*by_cat, RANGE_CAT)}  # c: one string for all
    shared: dict[Any, Any] = {}  # names and thread ids: a trace repeats a few thousand of them
    base = ranges = 0
    while raws:
        chunk = raws[:CHUNK]
        del raws[:CHUNK]
        j = 0
        try:
            for j, raw in enumerate(chunk):  # noqa: B007 (j names the event of an error)
                e = wire_event.decode(raw)
                if e.ph != "X" or (route := routes.get(e.cat)) is None:
                    continue
                group, kept, cat = route
                a = e.args
                if group == "launch":
                    args: Any = launch_args.decode(a) if len(a) else NO_LAUNCH_ARGS
                elif group == "op":
                    args = _op_args(op_args.decode(a), texts) if len(a) else NO_OP_ARGS
                elif group == "activity":
                    args = _activity_args(activity_args.decode(a), texts) if len(a) else NO_ACTIVITY_ARGS
                else:
                    ranges += 1
                    continue
                kept.append(Event(shared.setdefault(e.name, e.name), cat, e.ts, e.dur,
                                  shared.setdefault(e.pid, e.pid), shared.setdefault(e.tid, e.tid), args))
        except (msgspec.ValidationError, _MixedShapes) as exc:
            raise _event_error(p, base + j, chunk[j], exc) from None
        release(chunk[-1])
        base += len(chunk)
    return by_cat, ranges


def _event_error(p: Path, k: int, raw: Raw, exc: Exception) -> InputError:
    """The one-line error of event k, which the loop could not read: its stages again, to name the field."""
    if isinstance(exc, msgspec.ValidationError) and (error := _out_of_range(p, exc)) is not None:
        return error
    document = msgspec.json.decode(raw)  # the text is valid JSON: the split checked it
    where = f"traceEvents[{k}]"
    if isinstance(exc, _MixedShapes):
        key = "Input Dims" if "Input Dims" in document.get("args", {}) else "Input dims"
        return InputError(p, f"{where}.args: field {key!r} is a list mixing shapes and integers, expected a "
                             "list of shapes (lists of integers) or of shape lists", hint=HINT)
    dec = _decoders()
    try:
        e = dec["event"].decode(raw)
    except msgspec.ValidationError as first:
        return validation_error(p, first, document, event=k)
    group = _group(e.cat)
    try:
        wire = dec[group].decode(e.args)
    except msgspec.ValidationError as in_args:
        return validation_error(p, in_args, document, event=k, stage=".args")
    for attr, kind, name in (("input_dims", "shapes", "Input Dims"),
                             ("input_dims_2020", "shapes", "Input dims"),
                             ("input_type", "values", "Input type"),
                             ("concrete_inputs", "values", "Concrete Inputs"),
                             ("grid", "dim3", "grid"), ("block", "dim3", "block")):
        text = getattr(wire, attr, Raw())
        try:
            if len(text):
                dec[kind].decode(text)
        except msgspec.ValidationError as in_field:
            return validation_error(p, in_field, document, event=k, stage=f".args.{name}")
    return validation_error(p, exc, document, event=k)  # type: ignore[arg-type]


# --------------------------------------------------------------------------- loading


def load(path: str | os.PathLike[str]) -> TraceEvents:
    """The events of a chrome trace nsroof reads (plain or gzip), decoded into the declared schema;
    InputError on anything else."""
    p = Path(path)
    buffer, size = read_mapped(p)
    try:
        return _load(p, buffer, size)
    finally:
        if isinstance(buffer, mmap.mmap):
            try:
                buffer.close()
            except BufferError:  # an error's traceback still holds views of the text: unmapped when freed
                pass


def _load(p: Path, buffer: mmap.mmap | bytes, size: int, restated: bool = False) -> TraceEvents:
    """The events of the text in buffer[:size]. `restated`: the text is the standard parser's reading
    written again (once: it is strict JSON)."""
    text = memoryview(buffer)[:size]
    body = text[3:] if text[:3] == BOM else text
    try:
        wire = _decoders()["trace"].decode(body)
    except msgspec.ValidationError as exc:
        error = _out_of_range(p, exc) or validation_error(p, exc, _standard_parse(p, text))
        raise error from None
    except RecursionError:
        raise _too_deep(p) from None
    except msgspec.DecodeError:
        if restated:
            raise _invalid(p) from None
        strict = _restated(p, text)
        del body, text
        return _load(p, strict, len(strict), restated=True)
    if isinstance(wire, WireTrace):
        top = Trace(wire.deviceProperties, wire.nsroof, wire.distributedInfo, wire.platform)
        raws, wire.traceEvents = wire.traceEvents, []
    else:
        top, raws = Trace(), wire
    del wire, body, text
    try:
        by_cat, ranges = _decode_events(p, raws, _releaser(buffer))
    except msgspec.DecodeError:  # inside an event the split passed over (bytes that are not UTF-8): the
        if restated:               # text again (its pages may be handed back already)
            raise _invalid(p) from None
        strict = _restated(p, read_bytes(p))
        return _load(p, strict, len(strict), restated=True)
    return TraceEvents(top, [e for c in ACTIVITY_CATS for e in by_cat[c]],
                       [e for c in LAUNCH_CATS for e in by_cat[c]], [e for c in OP_CATS for e in by_cat[c]],
                       [e for c in ANNOTATION_CATS for e in by_cat[c]], ranges)


def load_ranges(path: str | os.PathLike[str]) -> list[RangeEvent]:
    """The CUPTI range-profiler events of a trace with every arg (their counters): read again, for the
    traces that have them (load checked the file)."""
    p = Path(path)
    raw = read_bytes(p)
    body = memoryview(raw)[3:] if raw[:3] == BOM else raw
    kind = RangeTrace | list[RangeEvent]
    try:
        try:
            decoded = msgspec.json.decode(body, type=kind)
        except msgspec.DecodeError:
            # NaN / Infinity tokens: restated as load restates them (null, absent), so a non-finite pid or
            # counter reads here as it did there, not as a float the declared types refuse
            decoded = msgspec.json.decode(_restated(p, raw), type=kind)
    except msgspec.ValidationError as exc:
        raise validation_error(p, exc, _standard_parse(p, raw)) from None
    events = decoded.traceEvents if isinstance(decoded, RangeTrace) else decoded
    return [e for e in events if e.cat == RANGE_CAT]
