"""The .ncu-rep container, checked before any library reads it (docs/readme/ncu_rep.md): the magic `NVR\\0`,
the length-prefixed protobuf file header, then blocks until the end of the file, each a length-prefixed
BlockHeader and a payload of length-prefixed messages that fills it exactly (the framing of Nsight Compute's
extras/FileFormat/ProfilerReport.proto). `ncu_report` loads a damaged file silently as zero kernels, so
damage is found here and reported as such, with the byte where it starts.
"""

from __future__ import annotations

import os
import struct
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from nsroof.errors import InputError

MAGIC = b"NVR\0"

CSV_ROUTE = ("export a CSV on a machine with Nsight Compute: "
             "`LC_ALL=C ncu -i REPORT.ncu-rep --csv --page raw --print-units base > REPORT.csv` "
             "and pass that")
DAMAGED_HINT = ("the report is truncated or corrupted: copy it again from where ncu wrote it, or "
                + CSV_ROUTE.replace("export a CSV", "re-export it as CSV"))

# Field numbers of ncu's extras/FileFormat/ProfilerReport.proto messages that the check needs.
_FILE_HEADER_VERSION = 1
_BLOCK_NUM_SOURCES = 1
_BLOCK_NUM_RESULTS = 2
_BLOCK_PAYLOAD_SIZE = 5
_BLOCK_PROCESS = 6
_PROCESS_ID = 1
_PROCESS_HOST = 2
_PROCESS_NAME = 3


@dataclass(frozen=True)
class ProcessInfo:
    process_id: int | None
    host: str
    name: str


@dataclass(frozen=True)
class Container:
    """What the container check learned: enough to validate the library's view of the file."""

    version: int | None
    num_blocks: int
    num_results: int
    processes: tuple[ProcessInfo, ...]  # one per profile result, in file order


class _Damage(Exception):
    def __init__(self, offset: int, what: str) -> None:
        super().__init__(what)
        self.offset = offset
        self.what = what


def _varint(buf: bytes, pos: int, end: int) -> tuple[int, int]:
    value = 0
    for shift in range(0, 70, 7):
        if pos >= end:
            raise _Damage(pos, "a protobuf varint runs past the end of its message")
        byte = buf[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value, pos
    raise _Damage(pos, "a protobuf varint is longer than 10 bytes")


def _fields(buf: bytes, start: int, end: int) -> Iterator[tuple[int, int, int, int]]:
    """Walk the top-level fields of one protobuf message: (field number, wire type, value or
    payload start, payload end). Raises _Damage when the bytes are not a well-formed message."""
    pos = start
    while pos < end:
        key, pos = _varint(buf, pos, end)
        number, wire = key >> 3, key & 7
        if number == 0:
            raise _Damage(pos, "a protobuf field number is 0")
        if wire == 0:
            value, pos = _varint(buf, pos, end)
            yield number, wire, value, pos
        elif wire == 2:
            length, pos = _varint(buf, pos, end)
            if pos + length > end:
                raise _Damage(pos, f"a protobuf field claims {length} bytes but only {end - pos} remain")
            yield number, wire, pos, pos + length
            pos += length
        elif wire in (1, 5):
            width = 8 if wire == 1 else 4
            if pos + width > end:
                raise _Damage(pos, "a fixed-width protobuf field runs past the end of its message")
            yield number, wire, pos, pos + width
            pos += width
        else:
            raise _Damage(pos, f"protobuf wire type {wire} is not valid")


def _u32(buf: bytes, pos: int, what: str) -> int:
    if pos + 4 > len(buf):
        raise _Damage(pos, f"the file ends inside the length of {what}")
    value: int = struct.unpack_from("<I", buf, pos)[0]
    return value


def _process_info(buf: bytes, start: int, end: int) -> ProcessInfo:
    pid: int | None = None
    host = name = ""
    for number, wire, a, b in _fields(buf, start, end):
        if number == _PROCESS_ID and wire == 0:
            pid = a
        elif number == _PROCESS_HOST and wire == 2:
            host = buf[a:b].decode("utf-8", "replace")
        elif number == _PROCESS_NAME and wire == 2:
            name = buf[a:b].decode("utf-8", "replace")
    return ProcessInfo(pid, host, name)


def scan_container(data: bytes) -> Container:
    """Check the framing of a whole report held in memory; raise _Damage at the first fault.

    Layout: MAGIC, u32 n + FileHeader[n], then blocks until the end of the file, each
    u32 n + BlockHeader[n] + payload[BlockHeader.PayloadSize], the payload being NumSources +
    NumResults messages, each u32 m + message[m], filling the payload exactly."""
    if len(data) < len(MAGIC) or data[: len(MAGIC)] != MAGIC:
        raise _Damage(0, "it does not start with the Nsight Compute report magic NVR\\0")
    pos = len(MAGIC)
    header_len = _u32(data, pos, "the file header")
    pos += 4
    if pos + header_len > len(data):
        raise _Damage(pos, f"the file header claims {header_len} bytes but only {len(data) - pos} remain")
    version: int | None = None
    for number, wire, value, _ in _fields(data, pos, pos + header_len):
        if number == _FILE_HEADER_VERSION and wire == 0:
            version = value
    pos += header_len

    num_blocks = num_results = 0
    processes: list[ProcessInfo] = []
    while pos < len(data):
        block = num_blocks
        block_header_len = _u32(data, pos, f"block {block}'s header")
        pos += 4
        if pos + block_header_len > len(data):
            raise _Damage(pos, f"block {block}'s header claims {block_header_len} bytes but only "
                               f"{len(data) - pos} remain")
        n_sources = n_results = payload = 0
        process = ProcessInfo(None, "", "")
        for number, wire, a, b in _fields(data, pos, pos + block_header_len):
            if wire == 0 and number == _BLOCK_NUM_SOURCES:
                n_sources = a
            elif wire == 0 and number == _BLOCK_NUM_RESULTS:
                n_results = a
            elif wire == 0 and number == _BLOCK_PAYLOAD_SIZE:
                payload = a
            elif wire == 2 and number == _BLOCK_PROCESS:
                process = _process_info(data, a, b)
        pos += block_header_len
        end = pos + payload
        if end > len(data):
            raise _Damage(pos,
                          f"block {block}'s payload claims {payload} bytes but only {len(data) - pos} remain")
        for entry in range(n_sources + n_results):
            length = _u32(data, pos, f"entry {entry} of block {block}")
            pos += 4
            if pos + length > end:
                raise _Damage(pos, f"entry {entry} of block {block} runs past the end of the block's payload")
            for _ in _fields(data, pos, pos + length):
                pass
            pos += length
        if pos != end:
            raise _Damage(pos,
                          f"block {block} has {end - pos} bytes after its {n_sources + n_results} entries")
        num_blocks += 1
        num_results += n_results
        processes.extend([process] * n_results)
    return Container(version, num_blocks, num_results, tuple(processes))


def check_container(path: str | os.PathLike[str]) -> Container:
    """Read and check the report file; raise InputError for a damaged or empty report."""
    p = Path(path)
    try:
        data = p.read_bytes()
    except FileNotFoundError:
        raise InputError(p, "no such file", hint="check the path") from None
    except OSError as exc:
        raise InputError(p, f"cannot read the report ({exc.strerror or exc})") from None
    if not data:
        raise InputError(p, "the report file is empty (0 bytes)", hint=DAMAGED_HINT)
    try:
        container = scan_container(data)
    except _Damage as exc:
        raise InputError(
            p, f"damaged .ncu-rep file: {exc.what} (at byte {exc.offset} of {len(data)})", hint=DAMAGED_HINT
        ) from None
    if container.num_results == 0:
        raise InputError(
            p,
            f"the report holds no profiled kernels (0 profile results in {container.num_blocks} "
            f"block{'' if container.num_blocks == 1 else 's'})",
            hint="ncu ran but profiled nothing: check its --kernel-name/--nvtx-include/--launch-skip filters "
            "and that the application launched a kernel",
        )
    return container
