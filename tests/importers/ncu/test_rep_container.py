"""nsroof.importers.ncu.rep_container: the .ncu-rep container is checked before any library reads it, so a
damaged or empty report is one clear InputError (never zero kernels), with neither the `ncu-report` package
nor a GPU. Synthetic containers are built byte by byte; real reports come from ../shared/fixtures (skipped
when absent)."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest

from nsroof.errors import InputError
from nsroof.importers.ncu import rep as ncu_rep
from nsroof.importers.ncu import rep_container

# ---------------------------------------------------------------------------------------------
# Synthetic containers: the framing of docs/ncu-formats.md §2.1, built byte by byte
# ---------------------------------------------------------------------------------------------


def _varint(n: int) -> bytes:
    out = bytearray()
    while True:
        byte, n = n & 0x7F, n >> 7
        out.append(byte | (0x80 if n else 0))
        if not n:
            return bytes(out)


def _f_int(number: int, value: int) -> bytes:
    return _varint(number << 3) + _varint(value)


def _f_bytes(number: int, payload: bytes) -> bytes:
    return _varint(number << 3 | 2) + _varint(len(payload)) + payload


def _framed(message: bytes) -> bytes:
    return struct.pack("<I", len(message)) + message


def _process(pid: int, host: str, name: str) -> bytes:
    return _f_int(1, pid) + _f_bytes(2, host.encode()) + _f_bytes(3, name.encode())


def _block(n_sources: int, results: list[bytes], process: bytes = b"") -> bytes:
    sources = [_f_bytes(1, b"source text") for _ in range(n_sources)]
    payload = b"".join(_framed(m) for m in sources + results)
    header = _f_int(1, n_sources) + _f_int(2, len(results)) + _f_int(5, len(payload)) + _f_bytes(6, process)
    return _framed(header) + payload


def _report(*blocks: bytes, version: int = 7) -> bytes:
    return b"NVR\0" + _framed(_f_int(1, version)) + b"".join(blocks)


def _result(kernel: str) -> bytes:
    return _f_int(1, 77) + _f_bytes(6, kernel.encode())  # ThreadID, a kernel name field


def _synthetic_two_kernels() -> tuple[bytes, list[int]]:
    """A report with a session block, a source block and two result blocks; also returns the block
    boundaries (offsets where a cut leaves whole blocks)."""
    proc = _process(4242, "node7", "/opt/app/bin/train")
    parts = [
        _report(),
        _block(0, [], proc),
        _block(1, [], proc),
        _block(0, [_result("k0")], proc),
        _block(0, [_result("k1")], proc),
    ]
    boundaries, offset = [], 0
    for part in parts:
        offset += len(part)
        boundaries.append(offset)
    return b"".join(parts), boundaries


def _write(tmp_path: Path, data: bytes, name: str = "x.ncu-rep") -> Path:
    p = tmp_path / name
    p.write_bytes(data)
    return p


# ---------------------------------------------------------------------------------------------
# A sound container
# ---------------------------------------------------------------------------------------------


def test_sound_synthetic_container_counts_results_and_processes(tmp_path: Path) -> None:
    data, _ = _synthetic_two_kernels()
    container = rep_container.check_container(_write(tmp_path, data))
    assert container.version == 7
    assert container.num_blocks == 4
    assert container.num_results == 2  # one per result block
    assert container.processes == (rep_container.ProcessInfo(4242, "node7", "/opt/app/bin/train"),) * 2


def test_every_shared_report_has_a_sound_container(shared_fixtures: Path) -> None:
    # kernel counts from ../shared/fixtures/MANIFEST.md
    expected = {"alprielse__2025-04-21-77_06-MT": 3, "amitadate__PS1_100_profile": 6,
                "lashi__smemTranspose": 5, "nsighttraining__manual_nvtx": 3, "speedyscan__profile": 1,
                "yzwang__profile": 2}
    for name, kernels in expected.items():
        container = rep_container.check_container(shared_fixtures / "rep" / f"{name}.ncu-rep")
        assert container.num_results == kernels, name
        assert container.version == 7


# ---------------------------------------------------------------------------------------------
# Damaged reports: one clear InputError, never zero kernels
# ---------------------------------------------------------------------------------------------


def _damaged(path: Path) -> str:
    with pytest.raises(InputError) as info:
        ncu_rep.read(path)
    message = str(info.value)
    assert "\n" not in message
    assert message.startswith(str(path))
    return message


def test_every_cut_of_a_synthetic_report_is_damaged_or_shorter(tmp_path: Path) -> None:
    data, boundaries = _synthetic_two_kernels()
    for cut in range(len(data)):
        p = _write(tmp_path, data[:cut])
        if cut in boundaries:
            # a cut between blocks leaves a well-formed, shorter report: nothing to detect, but it
            # must still hold the results whose blocks survived
            kept = sum(1 for b in boundaries[3:] if b <= cut)
            if kept == 0:
                assert "no profiled kernels" in _damaged(p)
            else:
                assert rep_container.check_container(p).num_results == kept
            continue
        message = _damaged(p)
        if cut == 0:
            assert "empty" in message
        else:
            assert "damaged .ncu-rep file" in message, (cut, message)
        assert "ncu -i" in message  # the hint names the way out


def test_missing_magic_is_damaged(tmp_path: Path) -> None:
    data, _ = _synthetic_two_kernels()
    message = _damaged(_write(tmp_path, b"NVQ\0" + data[4:]))
    assert "NVR\\0" in message and "at byte 0" in message


def test_bare_protobuf_block_without_header_is_damaged(tmp_path: Path) -> None:
    # the real-world failure of docs/ncu-formats.md §2.1: kernel records present, no NVR\0 header
    data, boundaries = _synthetic_two_kernels()
    assert "damaged" in _damaged(_write(tmp_path, data[boundaries[2]:]))


def test_oversized_block_length_is_damaged(tmp_path: Path) -> None:
    data, boundaries = _synthetic_two_kernels()
    garbled = bytearray(data)
    garbled[boundaries[0] : boundaries[0] + 4] = struct.pack("<I", 0xFFFFFFF0)
    assert "block 0's header claims" in _damaged(_write(tmp_path, bytes(garbled)))


def test_invalid_wire_type_in_a_header_is_damaged(tmp_path: Path) -> None:
    data, boundaries = _synthetic_two_kernels()
    garbled = bytearray(data)
    garbled[boundaries[0] + 4] = (1 << 3) | 7  # field 1 with wire type 7, which protobuf does not have
    assert "wire type 7" in _damaged(_write(tmp_path, bytes(garbled)))


def test_payload_longer_than_its_entries_is_damaged(tmp_path: Path) -> None:
    proc = _process(1, "h", "p")
    payload = _framed(_result("k0")) + b"\0\0\0"  # 3 stray bytes after the only entry
    header = _f_int(2, 1) + _f_int(5, len(payload)) + _f_bytes(6, proc)
    data = _report(_framed(header) + payload)
    assert "3 bytes after its 1 entries" in _damaged(_write(tmp_path, data))


def test_empty_file_is_an_error(tmp_path: Path) -> None:
    assert "empty" in _damaged(_write(tmp_path, b""))


# ---------------------------------------------------------------------------------------------
# A sound report without kernels
# ---------------------------------------------------------------------------------------------


def test_report_without_profiled_kernels_says_so(tmp_path: Path) -> None:
    proc = _process(9, "h", "/bin/app")
    data = _report(_block(0, [], proc), _block(2, [], proc))
    message = _damaged(_write(tmp_path, data))
    assert "holds no profiled kernels (0 profile results in 2 blocks)" in message
    assert "damaged" not in message


def test_header_only_report_has_no_kernels(tmp_path: Path) -> None:
    assert "no profiled kernels" in _damaged(_write(tmp_path, _report()))


# ---------------------------------------------------------------------------------------------
# Damaged copies of real reports
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("fraction", [0.0001, 0.01, 0.5, 0.999])
def test_truncated_real_report_is_damaged(shared_fixtures: Path, tmp_path: Path, fraction: float) -> None:
    data = (shared_fixtures / "rep" / "nsighttraining__manual_nvtx.ncu-rep").read_bytes()
    cut = max(5, int(len(data) * fraction))
    from nsroof import importers

    with pytest.raises(InputError, match="damaged .ncu-rep file"):
        importers.read(_write(tmp_path, data[:cut], "cut.ncu-rep"))


def test_garbled_real_report_is_damaged(shared_fixtures: Path, tmp_path: Path) -> None:
    data = bytearray((shared_fixtures / "rep" / "lashi__index.ncu-rep").read_bytes())
    data[0:4] = b"\x12\x34\x56\x78"
    with pytest.raises(InputError, match="does not start with the Nsight Compute report magic"):
        ncu_rep.read(_write(tmp_path, bytes(data)))
    data = bytearray((shared_fixtures / "rep" / "lashi__index.ncu-rep").read_bytes())
    first_block = 8 + struct.unpack_from("<I", data, 4)[0]
    data[first_block : first_block + 4] = struct.pack("<I", len(data))
    with pytest.raises(InputError, match="damaged .ncu-rep file: block 0's header claims"):
        ncu_rep.read(_write(tmp_path, bytes(data)))
